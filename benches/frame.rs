//! Keypress-to-frame time of the explorer on a tree of a million nodes.
//!
//! Builds a tar of 1,000,000 empty members (a million extractions; their
//! nodes are 977 lazy groups of 1,024 entries) in a temporary directory, parses it, expands it,
//! then times each key: the app's handling plus drawing a 160×50 frame into
//! ratatui's TestBackend (buffer diff included; the terminal's own output is
//! not). Run with `cargo bench --bench frame`; `cargo test` skips it.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pparse::{Options, Session};
use pparse_explorer::Theme;
use pparse_explorer::app::App;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const MEMBERS: usize = 1_000_000;

fn header(name: &str) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(b"00000000000\0");
    h[136..148].copy_from_slice(b"14546434005\0");
    h[156] = b'0';
    h[257..265].copy_from_slice(b"ustar\x0000");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

fn make_tar(path: &std::path::Path) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..MEMBERS {
        f.write_all(&header(&format!("dir/file{i:07}.txt")))
            .unwrap();
    }
    f.write_all(&[0u8; 1024]).unwrap();
}

fn key(app: &mut App, term: &mut Terminal<TestBackend>, code: KeyCode) -> Duration {
    let t = Instant::now();
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
    while let Ok(d) = app.done.try_recv() {
        app.on_done(d);
    }
    pparse_explorer::render(app, term).unwrap();
    t.elapsed()
}

fn report(what: &str, mut times: Vec<Duration>) {
    times.sort();
    let q = |p: f64| times[((times.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e3;
    println!(
        "{what:<44} n={:<4} p50 {:>6.2} ms   p95 {:>6.2} ms   max {:>6.2} ms",
        times.len(),
        q(0.5),
        q(0.95),
        q(1.0)
    );
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("frame: run with `cargo bench --bench frame`");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("million.tar");
    let t = Instant::now();
    make_tar(&path);
    println!(
        "made {} ({} members) in {:.1?}",
        path.display(),
        MEMBERS,
        t.elapsed()
    );
    let t = Instant::now();
    let session = Arc::new(Session::open(&path, Options::default()).unwrap());
    session.wait();
    {
        let tree = session.tree();
        println!(
            "parsed in {:.1?}: {} extractions, {} top-level nodes",
            t.elapsed(),
            tree.len(),
            tree.root().nodes.len()
        );
    }
    let mut app = App::new(session, Theme::load("dark").unwrap());
    let mut term = Terminal::new(TestBackend::new(160, 50)).unwrap();
    pparse_explorer::render(&mut app, &mut term).unwrap();

    use KeyCode::*;
    // While the parse runs: the same file opened again, keys every 5 ms.
    {
        let live = Arc::new(Session::open(&path, Options::default()).unwrap());
        let mut app = App::new(live.clone(), Theme::load("dark").unwrap());
        let mut term = Terminal::new(TestBackend::new(160, 50)).unwrap();
        let mut times = Vec::new();
        let mut codes = [Enter, Down, Down, Enter]
            .into_iter()
            .chain(std::iter::repeat(Down));
        while !live.is_finished() {
            times.push(key(&mut app, &mut term, codes.next().unwrap()));
            std::thread::sleep(Duration::from_millis(5));
        }
        report("during the parse: keys every 5 ms", times);
    }
    let mut times = vec![key(&mut app, &mut term, Enter)];
    report("extractions: expand 1M children (Enter)", times.clone());
    times.clear();
    for _ in 0..300 {
        times.push(key(&mut app, &mut term, Down));
    }
    report("extractions: Down", times.clone());
    times.clear();
    for _ in 0..100 {
        times.push(key(&mut app, &mut term, PageDown));
    }
    report("extractions: PgDn", times.clone());
    times.clear();
    for c in [End, Home, End, Home, End] {
        times.push(key(&mut app, &mut term, c));
    }
    report("extractions: End / Home (1M rows apart)", times.clone());
    times.clear();
    for _ in 0..5 {
        times.push(key(&mut app, &mut term, Home));
        times.push(key(&mut app, &mut term, Enter));
    }
    report("extractions: collapse / expand 1M children", times.clone());

    // The node tree of the tar: its groups of entries.
    times.clear();
    key(&mut app, &mut term, Home);
    key(&mut app, &mut term, Tab);
    for _ in 0..300 {
        times.push(key(&mut app, &mut term, Down));
    }
    report("nodes: Down", times.clone());
    times.clear();
    for c in [End, Home, End, Home, End] {
        times.push(key(&mut app, &mut term, c));
    }
    report("nodes: End / Home", times.clone());
    times.clear();
    key(&mut app, &mut term, Tab);
    for _ in 0..200 {
        times.push(key(&mut app, &mut term, PageDown));
    }
    report(
        "hex: PgDn (cursor selects the node under it)",
        times.clone(),
    );
}
