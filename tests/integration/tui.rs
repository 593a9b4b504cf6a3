//! The explorer drawn into ratatui's TestBackend and driven by real key
//! sequences on real fixtures (gitui-style app tests).

use std::sync::Arc;
use std::time::{Duration, Instant};

use pparse::{Options, Session};
use pparse_explorer::Theme;
use pparse_explorer::app::{App, Pane};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::crossterm::event::{
    KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

use crate::util::*;

pub(crate) struct Harness {
    pub app: App,
    pub term: Terminal<TestBackend>,
}

impl Harness {
    pub(crate) fn open(name: &str, bytes: Vec<u8>) -> Harness {
        Harness::sized(name, bytes, 120, 40)
    }

    pub(crate) fn sized(name: &str, bytes: Vec<u8>, w: u16, h: u16) -> Harness {
        let session = Session::from_bytes(name, bytes, Options::default());
        Harness::with_session(session, Theme::load("dark").unwrap(), w, h)
    }

    pub(crate) fn with_session(session: Session, theme: Theme, w: u16, h: u16) -> Harness {
        let app = App::new(Arc::new(session), theme);
        let term = Terminal::new(TestBackend::new(w, h)).unwrap();
        let mut h = Harness { app, term };
        h.settle();
        h
    }

    /// Draws and feeds background results until nothing is pending: the
    /// parse is over, the worker is idle, and a frame asks for nothing new.
    pub(crate) fn settle(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(Instant::now() < deadline, "the explorer did not settle");
            while let Ok(d) = self.app.done.try_recv() {
                self.app.on_done(d);
            }
            pparse_explorer::render(&mut self.app, &mut self.term).unwrap();
            let idle = self.app.session.is_finished()
                && self.app.worker.pending() == 0
                && self.app.done.is_empty();
            if idle {
                // One more frame: it must not have asked for anything.
                pparse_explorer::render(&mut self.app, &mut self.term).unwrap();
                if self.app.worker.pending() == 0 && self.app.done.is_empty() {
                    // Every result went to a part that read it.
                    assert_eq!(self.app.unclaimed_results(), 0, "results nobody read");
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Sends keys: plain characters, or `<Enter>`, `<Tab>`, `<S-Tab>`, `<Esc>`,
    /// `<Up>`, `<Down>`, `<Left>`, `<Right>`, `<PgUp>`, `<PgDn>`, `<Home>`,
    /// `<End>`, `<BS>`, `<C-c>`, `<C-u>`, `<C-d>`, `<lt>` (a `<`); settles
    /// after each key.
    pub(crate) fn keys(&mut self, seq: &str) {
        let mut rest = seq;
        while !rest.is_empty() {
            let (code, mods, used) = if rest.starts_with('<') && rest.contains('>') {
                let end = rest.find('>').unwrap();
                let name = &rest[1..end];
                let (code, mods) = match name {
                    "Enter" => (KeyCode::Enter, KeyModifiers::NONE),
                    "Tab" => (KeyCode::Tab, KeyModifiers::NONE),
                    "S-Tab" => (KeyCode::BackTab, KeyModifiers::SHIFT),
                    "Esc" => (KeyCode::Esc, KeyModifiers::NONE),
                    "Up" => (KeyCode::Up, KeyModifiers::NONE),
                    "Down" => (KeyCode::Down, KeyModifiers::NONE),
                    "Left" => (KeyCode::Left, KeyModifiers::NONE),
                    "Right" => (KeyCode::Right, KeyModifiers::NONE),
                    "PgUp" => (KeyCode::PageUp, KeyModifiers::NONE),
                    "PgDn" => (KeyCode::PageDown, KeyModifiers::NONE),
                    "Home" => (KeyCode::Home, KeyModifiers::NONE),
                    "End" => (KeyCode::End, KeyModifiers::NONE),
                    "BS" => (KeyCode::Backspace, KeyModifiers::NONE),
                    "C-c" => (KeyCode::Char('c'), KeyModifiers::CONTROL),
                    "C-u" => (KeyCode::Char('u'), KeyModifiers::CONTROL),
                    "C-d" => (KeyCode::Char('d'), KeyModifiers::CONTROL),
                    "lt" => (KeyCode::Char('<'), KeyModifiers::NONE),
                    other => panic!("unknown key <{other}>"),
                };
                (code, mods, end + 1)
            } else {
                let c = rest.chars().next().unwrap();
                (KeyCode::Char(c), KeyModifiers::NONE, c.len_utf8())
            };
            rest = &rest[used..];
            self.app.on_key(KeyEvent::new(code, mods));
            self.settle();
        }
    }

    pub(crate) fn click(&mut self, x: u16, y: u16) {
        self.mouse(MouseEventKind::Down(MouseButton::Left), x, y);
        self.mouse(MouseEventKind::Up(MouseButton::Left), x, y);
    }

    pub(crate) fn mouse(&mut self, kind: MouseEventKind, x: u16, y: u16) {
        self.app.on_mouse(MouseEvent {
            kind,
            column: x,
            row: y,
            modifiers: KeyModifiers::NONE,
        });
        self.settle();
    }

    /// The screen as text, one line per row.
    pub(crate) fn screen(&self) -> String {
        let buf = self.term.backend().buffer();
        let mut out = String::new();
        for y in 0..buf.area.height {
            for x in 0..buf.area.width {
                out.push_str(buf[(x, y)].symbol());
            }
            out.push('\n');
        }
        out
    }

    /// Screen row (y) whose text contains `needle`.
    pub(crate) fn row_of(&self, needle: &str) -> Option<u16> {
        self.screen()
            .lines()
            .position(|l| l.contains(needle))
            .map(|y| y as u16)
    }

    pub(crate) fn selected_ext_path(&self) -> String {
        let t = self.app.session.tree();
        t.path_of(self.app.ext())
    }
}

pub(crate) fn assert_on_screen(h: &Harness, needle: &str) {
    let s = h.screen();
    assert!(s.contains(needle), "{needle:?} not on screen:\n{s}");
}

/// Background results go to the part of the explorer that asked, by
/// address. A late one for a panel closed since goes nowhere, quietly; one
/// of a type its addressee does not read is a bug: counted, and in a debug
/// build (the tests') it stops the explorer.
#[test]
fn results_are_routed_by_address_and_a_stray_one_is_a_bug() {
    use pparse_explorer::worker::{Done, To};
    let mut h = Harness::open("nested.tar.gz", fixture("nested.tar.gz"));
    h.app.on_done(Done {
        to: To::Tensors,
        payload: Box::new(()),
    });
    assert_eq!(h.app.unclaimed_results(), 0, "a closed panel's late result");
    let stray = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        h.app.on_done(Done {
            to: To::Hex,
            payload: Box::new(7u8),
        });
    }));
    assert_eq!(stray.is_err(), cfg!(debug_assertions));
    assert_eq!(h.app.unclaimed_results(), 1);
}

#[test]
fn navigates_into_a_nested_zip_and_shows_its_bytes() {
    let mut h = Harness::open("nested.tar.gz", fixture("nested.tar.gz"));
    assert_on_screen(&h, "nested.tar.gz");
    assert_on_screen(&h, "[gzip]");
    // Expand the file and the tar, then find docs/inner.zip.
    h.keys("<Enter><Down><Enter>");
    assert_on_screen(&h, "docs/inner.zip");
    h.keys("/inner.zip<Enter>");
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/inner.zip");
    // The inspector shows the PATH that `pparse cat` takes.
    assert_on_screen(&h, "path     nested.tar/docs/inner.zip");
    h.keys("<Enter><Down>");
    assert_eq!(
        h.selected_ext_path(),
        "nested.tar/docs/inner.zip/chapter1.txt"
    );
    // Its bytes are the source file's.
    let src = source_bytes("src/inner/chapter1.txt");
    let first = String::from_utf8_lossy(&src[..12]).to_string();
    let hex: Vec<String> = src[..8].iter().map(|b| format!("{b:02x}")).collect();
    assert_on_screen(&h, &hex.join(" "));
    assert_on_screen(&h, &first[..8]);
    assert_on_screen(&h, "36,000 bytes");
}

#[test]
fn node_tree_loads_lazily_and_drives_the_hex_cursor() {
    let mut h = Harness::open("ustar.tar", fixture("ustar.tar"));
    h.keys("<Tab>");
    assert_eq!(h.app.focus(), Pane::Nodes);
    // The first entry's fields are not loaded until expanded.
    {
        let t = h.app.session.tree();
        assert!(matches!(
            t.exts[0].nodes[0].children,
            pparse::node::Children::Unloaded
        ));
    }
    h.keys("<Enter>");
    assert_on_screen(&h, "header");
    h.keys("<Down><Enter><Down><Down><Down><Down><Down>");
    // The size field of the first header: offset 124.
    assert_on_screen(&h, "size");
    assert_eq!(h.app.place().cursor, 124);
    assert_on_screen(&h, "0x7c..0x88");
    // Moving the hex cursor selects the deepest node there: the mtime field.
    h.keys("<Tab>g136<Enter>");
    assert_eq!(h.app.focus(), Pane::Hex);
    let sel = h.app.selected_node().unwrap();
    let t = h.app.session.tree();
    let n = t.exts[0].nodes[0].descend(&sel[1..]).unwrap();
    assert_eq!(&*n.name, "mtime");
}

#[test]
fn goto_search_and_next_match_in_the_hex_view() {
    let mut h = Harness::open("nested_stored.zip", fixture("nested_stored.zip"));
    h.keys("<Tab><Tab>");
    assert_eq!(h.app.focus(), Pane::Hex);
    h.keys("g0x10<Enter>");
    assert_eq!(h.app.place().cursor, 0x10);
    h.keys("g+0x10<Enter>");
    assert_eq!(h.app.place().cursor, 0x20);
    h.keys("g-8<Enter>");
    assert_eq!(h.app.place().cursor, 0x18);
    // Local headers: the first after the cursor, then the next, then back.
    let data = fixture("nested_stored.zip");
    let hits: Vec<u64> = data
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"PK\x03\x04")
        .map(|(i, _)| i as u64)
        .collect();
    h.keys("/50 4b 03 04<Enter>");
    assert_eq!(h.app.place().cursor, hits[1]);
    h.keys("n");
    assert_eq!(h.app.place().cursor, hits[2]);
    h.keys("N");
    assert_eq!(h.app.place().cursor, hits[1]);
    assert_on_screen(&h, &format!("match 2 of {}", hits.len()));
    // Past the last match, n goes on from the top, as in vim and less.
    h.keys(&format!("g{}<Enter>n", hits[hits.len() - 1]));
    assert_eq!(h.app.place().cursor, hits[0]);
    assert_on_screen(&h, &format!("match 1 of {}", hits.len()));
    assert_on_screen(&h, "wrapped");
    // Text search works too, and finds what is before the cursor.
    let at = data.windows(9).position(|w| w == b"gamma.txt").unwrap() as u64;
    let last = data.windows(9).rposition(|w| w == b"gamma.txt").unwrap() as u64;
    h.keys(&format!("g{}<Enter>/gamma.txt<Enter>", last + 1));
    assert_eq!(h.app.place().cursor, at);
    assert_on_screen(&h, "wrapped");
    h.keys("gzz<Enter>");
    assert_on_screen(&h, "not an offset");
}

#[test]
fn tree_search_finds_names_and_values() {
    let mut h = Harness::open("nested.tar.gz", fixture("nested.tar.gz"));
    h.keys("/deep<Enter>");
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/inner.zip/deep.zip");
    // One match: next wraps around to it.
    h.keys("n");
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/inner.zip/deep.zip");
    h.keys("/.txt<Enter>");
    let first = h.selected_ext_path();
    h.keys("n");
    assert_ne!(h.selected_ext_path(), first);
    assert_on_screen(&h, "match 2 of");
    h.keys("N");
    assert_eq!(h.selected_ext_path(), first);
    // Node search: the gzip member's header field holding the stored name.
    h.keys("<Home><Tab><Enter>/nested.tar<Enter>");
    assert_eq!(h.app.focus(), Pane::Nodes);
    let sel = h.app.selected_node().unwrap();
    let t = h.app.session.tree();
    let n = t.exts[0].nodes[sel[0]].descend(&sel[1..]).unwrap();
    assert_eq!(
        (&*n.name, n.value.as_ref().map(|v| v.to_string())),
        ("name", Some("nested.tar".into()))
    );
    drop(t);
    assert_on_screen(&h, "name  string  nested.tar");
}

#[test]
fn help_overlay_lists_every_key() {
    // Tall enough for the whole help (a small screen scrolls it: see
    // tui_habits::help_snapshot_on_a_small_screen).
    let mut h = Harness::sized("ustar.tar", fixture("ustar.tar"), 120, 60);
    h.keys("?");
    for (keys, _, what) in pparse_explorer::keys::HELP {
        assert_on_screen(&h, keys);
        assert_on_screen(&h, &what[..what.len().min(30)]);
    }
    h.keys("<Esc>");
    assert!(!h.screen().contains("┌ Keys"));
    h.keys("q");
    assert!(h.app.quitting());
}

#[test]
fn damaged_file_shows_status_and_damage_count() {
    let data = fixture("nested.tar.gz");
    let mut h = Harness::open("cut.tgz", data[..60_000].to_vec());
    assert_on_screen(&h, "truncated");
    let count = h.app.session.tree().damage_count;
    assert!(count > 0);
    assert_on_screen(&h, &format!("│ {count} damaged"));
    h.keys("<Enter><Down><Enter>/inner.zip<Enter><Enter><Down>");
    assert_eq!(
        h.selected_ext_path(),
        "nested.tar/docs/inner.zip/chapter1.txt"
    );
    assert_on_screen(&h, "deflate data cut off");
}

/// Soft damage (a flipped bit that zlib decodes through, so only the
/// CRC fails): the explorer shows the members as unverified, with the
/// reason in the inspector, never as complete.
#[test]
fn soft_damage_shows_members_unverified() {
    let good = fixture("nested.tar.gz");
    // GNU gzip keeps the name: the deflate data starts after its NUL.
    let start = if good[3] & 8 != 0 {
        good[10..].iter().position(|&b| b == 0).unwrap() + 11
    } else {
        10
    };
    let whole = inflate_prefix(&good[start..]);
    let data = (good.len() / 2..good.len() - 8)
        .step_by(61)
        .find_map(|at| {
            let mut d = good.clone();
            d[at] ^= 0x10;
            let out = inflate_prefix(&d[start..]);
            (out.len() == whole.len() && out != whole).then_some(d)
        })
        .expect("a flip that decodes through");
    let mut h = Harness::open("soft.tgz", data);
    h.keys("<Enter><Down><Enter>/README.md<Enter>");
    assert_eq!(h.selected_ext_path(), "nested.tar/README.md");
    assert_on_screen(&h, "unverified");
    assert_on_screen(&h, "README.md  ✗ unverified");
    assert_on_screen(&h, "status   unverified: ");
}

#[test]
fn mouse_clicks_wheel_and_split_drag() {
    let mut h = Harness::open("nested.tar.gz", fixture("nested.tar.gz"));
    // The flat list: members by their whole names.
    h.keys("f<Enter><Down><Enter>");
    let y = h.row_of("docs/guide.txt").unwrap();
    h.click(10, y);
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/guide.txt");
    assert_eq!(h.app.focus(), Pane::Extractions);
    h.mouse(MouseEventKind::ScrollDown, 10, y);
    assert_ne!(h.selected_ext_path(), "nested.tar/docs/guide.txt");
    h.mouse(MouseEventKind::ScrollUp, 10, y);
    assert_eq!(h.selected_ext_path(), "nested.tar/docs/guide.txt");
    // Click a byte in the hex pane: third byte of the second row.
    let hex = h.app.layout().hex;
    let x = hex.x + 1 + 8 + 2 + 2 * 3;
    h.click(x, hex.y + 2);
    assert_eq!(h.app.focus(), Pane::Hex);
    let bpr = h.app.layout().bpr;
    assert_eq!(h.app.place().cursor, bpr + 2);
    // Drag the border between the columns.
    let sx = h.app.layout().split_x;
    h.mouse(MouseEventKind::Down(MouseButton::Left), sx, 5);
    h.mouse(MouseEventKind::Drag(MouseButton::Left), 60, 5);
    h.mouse(MouseEventKind::Up(MouseButton::Left), 60, 5);
    assert_eq!(h.app.split(), 50);
}

/// Several colours in the text pane: the visible lines were highlighted.
fn assert_highlighted(h: &Harness) {
    let buf = h.term.backend().buffer();
    let hex = h.app.layout().hex;
    let mut colours = std::collections::HashSet::new();
    for y in hex.y + 1..hex.y + hex.height - 1 {
        for x in hex.x + 1..hex.x + hex.width - 1 {
            colours.insert(format!("{:?}", buf[(x, y)].fg));
        }
    }
    assert!(colours.len() > 2, "{colours:?}");
}

#[test]
fn text_view_highlights_source_code() {
    let mut h = Harness::open("nested.tar.gz", fixture("nested.tar.gz"));
    h.keys("/util.rs<Enter>t");
    assert!(h.app.text_mode());
    let src = source_bytes("src/nested/src/util.rs");
    let first_line =
        String::from_utf8_lossy(src.split(|&b| b == b'\n').next().unwrap()).to_string();
    assert_on_screen(&h, first_line.trim_end());
    assert!(h.app.highlighted(), "visible lines were highlighted");
    // Several colours on screen in the text pane.
    assert_highlighted(&h);
    // Scrolling by lines, then back to hex at the same place.
    h.keys("<Down><Down>");
    let second = src.iter().position(|&b| b == b'\n').unwrap() + 1;
    let third = second + src[second..].iter().position(|&b| b == b'\n').unwrap() + 1;
    assert_eq!(h.app.place().text_top, third as u64);
    h.keys("t");
    assert_eq!(h.app.place().cursor, third as u64);
}

#[test]
fn hostile_names_never_reach_the_terminal_raw() {
    let mut h = Harness::open("hostile.tar", fixture("hostile.tar"));
    h.keys("<Enter>");
    let s = h.screen();
    assert!(s.contains("\\x1b"), "escaped ESC shown:\n{s}");
    assert!(!s.contains('\x1b') && !s.contains('\x07'));
}

#[test]
fn cold_subtrees_are_unloaded_and_come_back() {
    let mut h = Harness::open("ustar.tar", fixture("ustar.tar"));
    h.app.set_node_budget(25);
    h.keys("<Tab>");
    // Expand and collapse entries one after another.
    for _ in 0..4 {
        h.keys("<Enter><Enter><Down>");
    }
    let t = h.app.session.tree();
    let loaded: Vec<bool> = t.exts[0].nodes[..4]
        .iter()
        .map(|n| matches!(n.children, pparse::node::Children::Loaded(_)))
        .collect();
    drop(t);
    assert!(
        !loaded[0],
        "the oldest collapsed subtree was dropped: {loaded:?}"
    );
    assert!(loaded[3], "the latest stays: {loaded:?}");
    assert!(h.app.loaded_nodes() <= 25 + 20);
    h.keys("<Home><Enter>");
    assert_on_screen(&h, "header");
}

#[test]
fn themes_and_no_color() {
    for name in ["dark", "light", "high-contrast"] {
        let t = Theme::load(name).unwrap();
        let session = Arc::new(Session::from_bytes(
            "ustar.tar",
            fixture("ustar.tar"),
            Options::default(),
        ));
        let mut app = App::new(session, t);
        let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
        pparse_explorer::render(&mut app, &mut term).unwrap();
    }
    let mono = Theme::mono();
    let session = Arc::new(Session::from_bytes(
        "ustar.tar",
        fixture("ustar.tar"),
        Options::default(),
    ));
    session.wait();
    let mut app = App::new(session, mono);
    let mut term = Terminal::new(TestBackend::new(100, 30)).unwrap();
    for _ in 0..50 {
        pparse_explorer::render(&mut app, &mut term).unwrap();
        while let Ok(d) = app.done.try_recv() {
            app.on_done(d);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let buf = term.backend().buffer();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            let c = &buf[(x, y)];
            assert_eq!(c.fg, ratatui::style::Color::Reset, "colour at {x},{y}");
            assert_eq!(c.bg, ratatui::style::Color::Reset, "colour at {x},{y}");
        }
    }
}

#[test]
fn resize_keeps_the_selection_visible() {
    let mut h = Harness::open("nested.tar.gz", fixture("nested.tar.gz"));
    h.keys("<Enter><Down><Enter><End>");
    let last = h.selected_ext_path();
    h.term.backend_mut().resize(60, 14);
    h.settle();
    let name = last.rsplit('/').next().unwrap();
    assert_on_screen(&h, &name[..name.len().min(10)]);
}

/// The whole screen, as text, after a few keys: a layout regression test.
#[test]
fn screen_snapshot() {
    let mut h = Harness::sized("nested_stored.zip", fixture("nested_stored.zip"), 120, 32);
    h.keys("<Enter><Down><Down><Enter><Tab><Down><Enter>");
    insta::assert_snapshot!("nested_stored_deep_zip", h.screen());
}

/// The opcode positions `pickletools.genops` gives for a pickle fixture.
fn genops_positions(name: &str) -> Vec<u64> {
    let text =
        std::fs::read_to_string(fixture_path(&format!("pickle/{name}.genops.json"))).unwrap();
    let ops: serde_json::Value = serde_json::from_str(&text).unwrap();
    ops.as_array()
        .unwrap()
        .iter()
        .map(|o| u(&o["pos"]))
        .collect()
}

/// The line the stepper shows for opcode `i` (0-based), from genops.
fn opcode_line(pos: &[u64], i: usize, size: u64) -> String {
    let end = pos.get(i + 1).copied().unwrap_or(size);
    format!(
        "opcode {} of {}  at {:#x}..{:#x}",
        i + 1,
        pos.len(),
        pos[i],
        end
    )
}

#[test]
fn pickle_stepper_walks_forward_and_back_through_genops() {
    let bytes = fixture("pickle/p2_containers.pkl");
    let size = bytes.len() as u64;
    let pos = genops_positions("p2_containers");
    let mut h = Harness::open("p2_containers.pkl", bytes);
    h.keys("p");
    assert_on_screen(&h, "Pickle VM (never executes)");
    assert_on_screen(&h, &opcode_line(&pos, 0, size));
    // Forward one opcode at a time: each step is the next genops position,
    // and the hex cursor sits on the opcode's first byte.
    for i in 1..40 {
        h.keys("j");
        assert_on_screen(&h, &opcode_line(&pos, i, size));
        assert_eq!(h.app.panel().marked().unwrap().1.start, pos[i]);
        assert_eq!(h.app.place().cursor, pos[i]);
    }
    // And back.
    for i in (25..39).rev() {
        h.keys("k");
        assert_on_screen(&h, &opcode_line(&pos, i, size));
        assert_eq!(h.app.place().cursor, pos[i]);
    }
    // After opcode 6 (BINPUT 1 at 0x10): MARK moved the dict to the
    // metastack, 'empty' is on the stack, both are memoised.
    h.keys("<Home>jjjjj");
    assert_on_screen(&h, &opcode_line(&pos, 5, size));
    let screen = h.screen();
    for want in [
        "stack (1, top first)",
        "0 'empty'",
        "metastack (1)",
        "under MARK 1: 1 item, top: {}",
        "memo (2)",
        "1: 'empty'",
        "0: {}",
    ] {
        assert!(screen.contains(want), "{want} missing:\n{screen}");
    }
    // The last opcode is STOP with the whole dict on the stack.
    h.keys("<End>");
    assert_on_screen(&h, &opcode_line(&pos, pos.len() - 1, size));
    assert_on_screen(&h, "STOP");
    // STOP pops the result, as pickletools' stack emulation says.
    assert_on_screen(&h, "stack (0, top first)");
    assert_on_screen(&h, "memo (55)");
    h.keys("k");
    assert_on_screen(&h, &opcode_line(&pos, pos.len() - 2, size));
    assert_on_screen(&h, "stack (1, top first)");
    // Esc closes the stepper and gives the node tree back.
    h.keys("<Esc>");
    assert!(!h.screen().contains("Pickle VM"));
}

#[test]
fn pickle_stepper_jumps_across_frames_of_a_large_pickle() {
    let bytes = fixture("pickle/p4_frames.pkl");
    let size = bytes.len() as u64;
    let pos = genops_positions("p4_frames");
    let mut h = Harness::open("p4_frames.pkl", bytes);
    h.keys("p<End>");
    let last = pos.len() - 1;
    assert_on_screen(&h, &opcode_line(&pos, last, size));
    // The hex view scrolled to the STOP byte.
    assert_on_screen(&h, &format!("{:08x}", pos[last] - pos[last] % 16));
    h.keys("k<PgUp>");
    let page = h.app.height(Pane::Nodes);
    let i = last - 1 - page;
    assert_on_screen(&h, &opcode_line(&pos, i, size));
    h.keys("<Home>");
    assert_on_screen(&h, &opcode_line(&pos, 0, size));
}

#[test]
fn pickle_stepper_stops_at_the_damage() {
    let bytes = fixture("pickle/damaged/trunc_p2_in_binunicode.pkl");
    let mut h = Harness::open("trunc_p2_in_binunicode.pkl", bytes);
    h.keys("p<End>");
    let screen = h.screen();
    assert!(screen.contains("cut off at"), "{screen}");
}

/// The tensor panel on a real torch file: values in logical (strided)
/// order, statistics and histogram, and `.npy` export byte-identical to
/// what numpy saves for the tensor torch loads.
#[test]
fn tensor_panel_shows_values_stats_and_exports_npy() {
    let mut h = Harness::open("views.pt", fixture("torch/views.pt"));
    h.keys("T");
    for name in [
        "base  F32 [4, 6]",
        "transposed  F32 [6, 4]",
        "shared_b  I64 [4]",
        "step  I16 [4]",
    ] {
        assert_on_screen(&h, name);
    }
    assert_on_screen(&h, "Tensors: views.pt (8)");
    h.keys("j");
    let screen = h.screen();
    for want in [
        "tensor   transposed  2 of 8",
        "stride [1, 6]",
        "0x0..0x60 (96 B) in views/data/0",
        "values   0.0 6.0 12.0 18.0 1.0 7.0 13.0 19.0",
        // numpy: arange(24).mean(), .std()
        "mean 11.500000  std 6.922187",
        "min 0.000000  max 23.000000",
        "24 finite",
        "histo",
    ] {
        assert!(screen.contains(want), "{want} missing:\n{screen}");
    }
    // The hex view shows the tensor's storage.
    assert!(
        h.app
            .session
            .tree()
            .get(h.app.ext())
            .unwrap()
            .display_name()
            .contains("views/data/0")
    );

    let dir = tempfile::tempdir().unwrap();
    for (key, name) in [
        ("j", "transposed"),
        ("jj", "slice"),
        ("jjjjj", "shared_b"),
        ("jjjjjjj", "step"),
    ] {
        let out = dir.path().join(format!("{name}.npy"));
        h.keys("<Home>");
        h.keys(key);
        h.keys("e");
        assert_on_screen(
            &h,
            &format!("write the tensor as .npy to (a new file): {name}.npy"),
        );
        h.keys("<C-u>");
        h.keys(&out.display().to_string());
        h.keys("<Enter>");
        let want = fixture(&format!("torch/npy/views.pt.{name}.npy"));
        assert_eq!(std::fs::read(&out).unwrap(), want, "{name}");
        // Said back as the absolute path written.
        assert_on_screen(&h, &format!("wrote {}", out.display()));
    }
    // An existing file is never overwritten.
    let out = dir.path().join("step.npy");
    std::fs::write(&out, b"keep").unwrap();
    h.keys("e<C-u>");
    h.keys(&out.display().to_string());
    h.keys("<Enter>");
    assert_on_screen(&h, "exists: nothing was written");
    assert_eq!(std::fs::read(&out).unwrap(), b"keep");
}

/// The tensor panel on a real safetensors file (silero-vad's).
#[test]
fn tensor_panel_on_safetensors() {
    let mut h = Harness::open(
        "silero_vad_16k.safetensors",
        fixture("safetensors/silero_vad_16k.safetensors"),
    );
    h.keys("T");
    for want in [
        "tensor   stft_conv.weight  1 of 15",
        "layout   F32 [258, 1, 256]  66,048 elements",
        "bytes    0x4c0..0x40cc0 (258.0 KiB) in silero_vad_16k.safetensors",
        "66,048 finite",
        "final_conv.bias  F32 [1]",
    ] {
        assert_on_screen(&h, want);
    }
    // The last tensor: its one value, and the hex view on its 4 bytes.
    h.keys("<End>");
    assert_on_screen(&h, "tensor   final_conv.bias  15 of 15");
    assert_eq!(h.app.place().cursor, 0x4c0 + 1238528);
}

/// An `.npz`: its members' arrays in one table, a Fortran-ordered one
/// shown in logical order (numpy: `a.flat`), a datetime as numpy prints it.
#[test]
fn tensor_panel_on_an_npz() {
    let mut h = Harness::open("compressed.npz", fixture("npy/compressed.npz"));
    h.keys("T");
    for want in [
        "weight  F32 [16, 8]",
        "bias  I64 [8]",
        "fortran  F32 [4, 6]",
        "when  M8[D] [1]",
    ] {
        assert_on_screen(&h, want);
    }
    h.keys("jj");
    for want in [
        "tensor   fortran  3 of 4",
        "stride [1, 4]",
        "values   1.1012625 0.33843127 -0.53997153 -1.2602419",
        "24 finite",
    ] {
        assert_on_screen(&h, want);
    }
    h.keys("j");
    assert_on_screen(&h, "values   2024-05-06");
}

/// TorchScript's `code/` entries are Python: the text view highlights them.
#[test]
fn torchscript_code_shows_as_highlighted_python() {
    let mut h = Harness::open("silero_vad.jit", fixture("torch/silero_vad.jit"));
    h.keys("/vad_annotator.py<Enter>t");
    assert!(h.app.text_mode());
    assert!(
        h.app
            .session
            .tree()
            .get(h.app.ext())
            .unwrap()
            .display_name()
            .ends_with("code/__torch__/vad/model/vad_annotator.py")
    );
    assert_on_screen(&h, "class VADRNNJITMerge(Module):");
    assert!(h.app.highlighted(), "visible lines were highlighted");
    assert_highlighted(&h);
}

/// The bytes `[start, end)` shown in the hex pane (the first one must be)
/// are marked as the selection (or as alternate children of it, or the
/// cursor on the first), and the few bytes around them are not.
fn assert_bytes_selected(h: &Harness, start: u64, end: u64) {
    let buf = h.term.backend().buffer();
    let hex = h.app.layout().hex;
    let bpr = h.app.layout().bpr;
    let top = h.app.place().top;
    let th = h.app.theme();
    let rows = (hex.height - 2) as u64;
    let marked = [th.selection, th.child, th.cursor];
    let visible = |off: u64| off >= top && off < top + rows * bpr;
    assert!(
        visible(start),
        "byte {start:#x} is not shown:\n{}",
        h.screen()
    );
    for off in start.saturating_sub(4)..end + 4 {
        if !visible(off) {
            continue;
        }
        let inside = (start..end).contains(&off);
        let (row, i) = ((off - top) / bpr, (off - top) % bpr);
        let x = hex.x + 1 + 8 + 2 + (i * 3 + i / 8) as u16;
        let y = hex.y + 1 + row as u16;
        let bg = buf[(x, y)].bg;
        if inside {
            assert!(
                marked.contains(&bg),
                "byte {off:#x} not marked ({bg:?}):\n{}",
                h.screen()
            );
        } else {
            assert!(
                bg != th.selection && bg != th.child,
                "byte {off:#x} outside {start:#x}..{end:#x} is marked:\n{}",
                h.screen()
            );
        }
    }
}

/// The selected node of the selected extraction: name, kind, value.
pub(crate) fn selected_node(h: &Harness) -> (String, String, Option<String>) {
    let ext = h.app.ext();
    let sel = h.app.selected_node().unwrap();
    let t = h.app.session.tree();
    let n = t.exts[ext].nodes[sel[0]].descend(&sel[1..]).unwrap();
    (
        n.name.to_string(),
        n.kind.to_string(),
        n.value.as_ref().map(|v| v.to_string()),
    )
}

/// An ONNX model is browsed field by field: names, types and values of the
/// protobuf fields, each one's bytes marked in the hex view.
#[test]
fn protobuf_fields_of_an_onnx_model() {
    let mut h = Harness::open("attrs.onnx", fixture("onnx/attrs.onnx"));
    assert_on_screen(&h, "[onnx]");
    // The first key in the node pane selects the first field.
    h.keys("<Tab><Down>");
    assert_eq!(selected_node(&h).0, "ir_version");
    assert_on_screen(&h, "ir_version  int64  10");
    h.keys("<Down><Down><Down><Down><Down><Down>");
    assert_eq!(selected_node(&h).0, "graph");
    h.keys("<Enter><Down>");
    assert_eq!(selected_node(&h).0, "node[0]");
    assert_bytes_selected(&h, 0x78, 0xb1);
    h.keys("<Enter><Down><Down><Down>");
    assert_eq!(
        selected_node(&h),
        (
            "op_type".to_string(),
            "string".to_string(),
            Some("\"Constant\"".to_string())
        )
    );
    for want in [
        "op_type  string  \"Constant\"",
        "node     op_type  string",
        "range    0x90..0x9a (10 bytes)",
        "value    \"Constant\"",
    ] {
        assert_on_screen(&h, want);
    }
    assert_eq!(h.app.place().cursor, 0x90);
    assert_bytes_selected(&h, 0x90, 0x9a);
}

/// A `.wandb` record: its chunk header and its protobuf fields, down to a
/// history item's name, each with its bytes in the file.
#[test]
fn wandb_record_chunks_and_fields() {
    let mut h = Harness::sized(
        "current-core.wandb",
        fixture("wandb/current-core.wandb"),
        160,
        40,
    );
    assert_on_screen(&h, "[wandb]");
    h.keys("<Tab>/history #13<Enter>");
    assert_eq!(selected_node(&h).0, "history #13");
    assert_on_screen(&h, "history #13  record  step 0: acc=0, lr=0.01");
    assert_bytes_selected(&h, 0x5f3, 0x691);
    h.keys("<Enter><Down>");
    assert_eq!(selected_node(&h).0, "chunk FULL");
    assert_on_screen(&h, "chunk FULL  chunk  151 bytes, crc32 dc107425");
    assert_on_screen(&h, "range    0x5f3..0x5fa (7 bytes)");
    assert_bytes_selected(&h, 0x5f3, 0x5fa);
    // num, then the history message, its first item and the item's name.
    h.keys("<Down>");
    assert_eq!(
        selected_node(&h),
        (
            "num".to_string(),
            "int64".to_string(),
            Some("13".to_string())
        )
    );
    h.keys("<Down>");
    assert_eq!(selected_node(&h).0, "history");
    h.keys("<Enter><Down>");
    assert_eq!(selected_node(&h).0, "item[0]");
    assert_bytes_selected(&h, 0x5ff, 0x60a);
    h.keys("<Enter><Down>");
    assert_eq!(
        selected_node(&h),
        (
            "nested_key[0]".to_string(),
            "string".to_string(),
            Some("\"acc\"".to_string())
        )
    );
    assert_on_screen(&h, "nested_key[0]  string  \"acc\"");
    assert_on_screen(&h, "range    0x601..0x606 (5 bytes)");
    assert_bytes_selected(&h, 0x601, 0x606);
}

/// Moves the metric list until `name` is the selected metric.
fn select_metric(h: &mut Harness, name: &str) {
    h.keys("<Home>");
    let want = format!("metric   {name}  ");
    for _ in 0..40 {
        if h.screen().contains(&want) {
            return;
        }
        h.keys("j");
    }
    panic!("metric {name} not found:\n{}", h.screen());
}

/// The selected metric's series.
fn metric_series(h: &Harness) -> pparse::offer::metrics::Series {
    match h.app.panel() {
        pparse_explorer::app::Panel::Metrics(p) => p.current_series().expect("series read").clone(),
        _ => panic!("no metrics panel"),
    }
}

/// The metrics of a W&B run (wandb 0.17.5's core writer, shifted blocks):
/// the list of metrics, the plot and figures of the one selected.
#[test]
fn metrics_panel_plots_a_wandb_history() {
    let mut h = Harness::open(
        "v0175-core-buggy.wandb",
        fixture("wandb/v0175-core-buggy.wandb"),
    );
    // The panel shows at once; the log is read in the background.
    h.app
        .on_key(KeyEvent::new(KeyCode::Char('M'), KeyModifiers::NONE));
    pparse_explorer::render(&mut h.app, &mut h.term).unwrap();
    assert_on_screen(&h, "Metrics: v0175-core-buggy.wandb");
    assert_on_screen(&h, "reading the log…");
    h.settle();
    // User metrics first, by name, with their counts; then W&B's own.
    let screen = h.screen();
    let rows: Vec<usize> = [
        "acc  120",
        "epoch  120",
        "grad/norm  120",
        "loss  120",
        "_step  121",
    ]
    .iter()
    .map(|m| {
        screen
            .lines()
            .position(|l| l.contains(m))
            .unwrap_or_else(|| panic!("{m} missing:\n{screen}"))
    })
    .collect();
    assert!(rows.windows(2).all(|w| w[0] < w[1]), "{rows:?}");
    assert_on_screen(&h, "266 records, 121 history");

    select_metric(&mut h, "loss");
    for want in [
        "loss by step",
        "count 120  min 0.00833333  max 1  last 0.00833333  NaN 0  inf 0",
        "steps    0..119",
    ] {
        assert_on_screen(&h, want);
    }
    let s = metric_series(&h);
    assert_eq!((s.count, s.steps), (120, Some((0.0, 119.0))));
    assert_eq!(s.points.len(), 120);
    assert_eq!(s.points[0], (0.0, 1.0));
    assert_eq!(s.points[119], (119.0, 1.0 / 120.0));
    // Braille dots drawn in the plot.
    let plot = h.app.layout().hex;
    let buf = h.term.backend().buffer();
    let dots = (plot.y..plot.y + plot.height)
        .flat_map(|y| (plot.x..plot.x + plot.width).map(move |x| (x, y)))
        .filter(|&(x, y)| {
            let c = buf[(x, y)].symbol().chars().next().unwrap_or(' ');
            ('\u{2801}'..='\u{28ff}').contains(&c)
        })
        .count();
    assert!(dots > 20, "{dots} braille cells:\n{}", h.screen());

    select_metric(&mut h, "acc");
    assert_on_screen(
        &h,
        "count 120  min 0  max 0.991667  last 0.991667  NaN 0  inf 0",
    );
    // (serde_json reads Python's 0.9916666666666667 one ulp high.)
    assert!((metric_series(&h).max - 119.0 / 120.0).abs() < 1e-12);
    insta::assert_snapshot!("wandb_metrics_acc", h.screen());

    // Esc closes the panel, and so does M.
    h.keys("<Esc>");
    assert!(!h.screen().contains("Metrics:"));
    h.keys("M");
    assert_on_screen(&h, "Metrics:");
    h.keys("M");
    assert!(!h.screen().contains("Metrics:"));
}

/// The legacy Python writer sets no `step`: `_step` gives the steps. With
/// no room for every series, each metric is read when selected.
#[test]
fn metrics_panel_steps_of_a_legacy_log_one_metric_at_a_time() {
    let mut h = Harness::open("v0175-legacy.wandb", fixture("wandb/v0175-legacy.wandb"));
    h.app.set_metric_budget(0);
    h.keys("M");
    select_metric(&mut h, "loss");
    assert_on_screen(&h, "count 120  min 0.00833333  max 1  last 0.00833333");
    assert_on_screen(&h, "steps    0..119");
    let s = metric_series(&h);
    assert_eq!(s.steps, Some((0.0, 119.0)));
    let steps: Vec<f64> = s.points.iter().map(|p| p.0).collect();
    assert_eq!(steps, (0..120).map(f64::from).collect::<Vec<_>>());
    // The x axis runs from step 0 to 119.
    let plot = h.app.layout().hex;
    let axis = h
        .screen()
        .lines()
        .nth((plot.y + plot.height - 2) as usize)
        .unwrap()
        .to_string();
    let axis: String = axis
        .chars()
        .skip(plot.x as usize + 1)
        .take(plot.width as usize - 2)
        .collect();
    let labels: Vec<&str> = axis.split_whitespace().collect();
    assert_eq!(labels, ["0", "59.5", "119"], "{axis:?}\n{}", h.screen());
    select_metric(&mut h, "_step");
    assert_on_screen(&h, "count 121  min 0  max 120");
    assert_on_screen(&h, "steps    0..120");
}

/// M on something that is not a W&B log says so.
#[test]
fn metrics_panel_needs_a_wandb_log() {
    let mut h = Harness::open("ustar.tar", fixture("ustar.tar"));
    h.keys("M");
    assert_on_screen(&h, "no W&B run log here");
    assert!(matches!(h.app.panel(), pparse_explorer::app::Panel::None));
}

/// Offsets of every `%name` token in `text`, in order.
fn value_tokens(text: &str, name: &str) -> Vec<u64> {
    text.match_indices(name)
        .filter(|(i, _)| {
            let next = text.as_bytes().get(i + name.len());
            !next.is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
        })
        .map(|(i, _)| i as u64)
        .collect()
}

/// In a printed Paddle program, `D` goes from a use to the op defining the
/// value and `u` / `U` step through its uses, wrapping around, also into
/// the regions of an if; the text view marks the selected op's bytes.
#[test]
fn paddle_values_are_followed_to_their_definition_and_uses() {
    let bytes = fixture("paddle/v3-control.txt");
    let text = String::from_utf8(bytes.clone()).unwrap();
    let mut h = Harness::open("v3-control.txt", bytes);
    let places = value_tokens(&text, "%0");
    let (def, uses) = (places[0], &places[1..]);
    assert!(uses.len() >= 3, "{uses:?}");
    let op_start = text.find("(%0) = \"pd_op.data\"").unwrap() as u64;
    assert_eq!(def, op_start + 1);

    // From the second use, in the hex view.
    h.keys(&format!("g{:#x}<Enter>", uses[1] + 1));
    h.keys("D");
    assert_eq!(h.app.place().cursor, op_start);
    assert_on_screen(&h, &format!("%0: defined here ({} uses", uses.len()));
    let (name, kind, _) = selected_node(&h);
    assert_eq!((name.as_str(), kind.as_str()), ("pd_op.data", "op"));

    // Through every use, and around.
    for (i, u) in uses.iter().enumerate() {
        h.keys("u");
        assert_eq!(h.app.place().cursor, *u, "use {i}");
        assert_on_screen(&h, &format!("%0: use {} of {}", i + 1, uses.len()));
    }
    h.keys("u");
    assert_eq!(h.app.place().cursor, uses[0]);
    assert_on_screen(&h, "(wrapped to the first)");
    h.keys("U");
    assert_eq!(h.app.place().cursor, *uses.last().unwrap());
    h.keys("U");
    assert_eq!(h.app.place().cursor, uses[uses.len() - 2]);
    // The use's operand node is selected, inside its op (loaded for it).
    let (name, kind, _) = selected_node(&h);
    assert_eq!((name.as_str(), kind.as_str()), ("%0", "operand"));

    // Back to the definition, then the text view: it shows the op's line
    // with the op's bytes marked.
    h.keys("D");
    assert_eq!(h.app.place().cursor, op_start);
    h.keys("t");
    assert!(h.app.text_mode());
    let row = h
        .row_of("(%0) = \"pd_op.data\"")
        .expect("the op's line on screen");
    let line = h.screen().lines().nth(row as usize).unwrap().to_string();
    let col = line.find("pd_op.data").unwrap();
    let col = line[..col].chars().count() as u16;
    let buf = h.term.backend().buffer();
    let selection = Theme::load("dark").unwrap().selection;
    assert_eq!(buf[(col, row)].bg, selection, "the op's bytes are marked");
    // The line above it (the program's `{`) is not.
    assert_ne!(buf[(col, row - 1)].bg, selection);

    // Nothing to follow outside a value: a message, no move.
    h.keys("t");
    h.keys("g0<Enter>");
    h.keys("D");
    assert_on_screen(&h, "no value here");
    assert_eq!(h.app.place().cursor, 0);
}

/// `E` lists a damaged program's errors as a compiler prints them (the
/// line and column, the source line, a caret), the same ones the reader
/// finds; selecting one moves the cursor to its bytes.
#[test]
fn paddle_diagnostics_panel_lists_errors_with_carets() {
    let text = String::from_utf8(fixture("paddle/v3-control.txt")).unwrap();
    let bad = text
        .replacen(
            "(%2) = \"pd_op.mean\" (%0, %1)",
            "(%2) = \"pd_op.mean\" (%0, %77)",
            1,
        )
        .replacen("    (%3) = ", "    garbage here\n    (%3) = ", 1);
    let want = pparse::parsers::ml::paddle::parse::read_all(bad.as_bytes()).diagnostics;
    assert_eq!(want.len(), 2, "{want:?}");
    let mut h = Harness::open("bad.txt", bad.clone().into_bytes());
    h.keys("E");
    assert_on_screen(&h, "Diagnostics: bad.txt (2)");
    for d in &want {
        let head = format!("{}:{} error: {}", d.at.line, d.at.col, d.message);
        // As much as the pane's width shows.
        assert_on_screen(&h, &head.chars().take(30).collect::<String>());
    }
    let screen = h.screen();
    let lines: Vec<&str> = screen.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.contains("use of undefined value %77"))
        .unwrap();
    // The source line, then a caret under `%77`.
    let src = lines[head + 1];
    let caret = lines[head + 2];
    let at = src.find("%77").unwrap();
    assert_eq!(caret[at..].chars().take(3).collect::<String>(), "^^^");
    // The first problem is selected and the cursor is on its bytes; then
    // the next one.
    assert_eq!(h.app.place().cursor, want[0].at.span.start);
    h.keys("j");
    assert_eq!(h.app.place().cursor, want[1].at.span.start);
    h.keys("E");
    assert!(matches!(h.app.panel(), pparse_explorer::app::Panel::None));

    // A clean program says so.
    let mut h = Harness::open("v3-control.txt", text.into_bytes());
    h.keys("E");
    assert_on_screen(&h, "no errors: the program reads cleanly");
}

/// `p` on a torch file's root steps its data.pkl, as `pparse pickle` does.
#[test]
fn pickle_stepper_opens_a_torch_files_data_pkl_from_its_root() {
    let mut h = Harness::open("dtypes.pt", fixture("torch/dtypes.pt"));
    h.keys("p");
    assert_on_screen(&h, "Pickle VM (never executes)");
    assert!(
        h.selected_ext_path().ends_with("data.pkl"),
        "{}",
        h.screen()
    );
    assert_eq!(h.app.panel().marked().unwrap().1.start, 0, "{}", h.screen());
}

/// A tensor whose bytes are all cut off shows a dash for its values and
/// statistics, never NaN or a blank.
#[test]
fn a_missing_tensor_reads_as_dashes() {
    let mut bytes = fixture("safetensors/silero_vad_16k.safetensors");
    bytes.truncate(0x4c0 + 100);
    let mut h = Harness::open("cut.safetensors", bytes);
    h.keys("T<End>");
    assert_on_screen(&h, "tensor   final_conv.bias  15 of 15");
    let screen = h.screen();
    assert!(screen.contains("values   —"), "{screen}");
    assert!(screen.contains("min —  max —"), "{screen}");
    assert!(screen.contains("1 missing"), "{screen}");
    assert!(!screen.contains("NaN"), "{screen}");
    // Cut tensors say so in words in the list, not only by colour.
    assert!(
        screen.contains("final_conv.bias  [truncated]  F32 [1]"),
        "{screen}"
    );
}

/// `:` runs a jq filter over the selected extraction, as `pparse query`
/// does, in the background; its outputs fill a panel, the inspector shows
/// the selected one whole, and a filter that does not compile says where.
#[test]
fn a_query_runs_over_the_selection() {
    let mut h = Harness::open("nested.tar.gz", fixture("nested.tar.gz"));
    h.keys(":members | select(.kind == \"dir\") | .path<Enter>");
    let s = h.screen();
    assert!(s.contains("Query"), "{s}");
    assert!(s.contains("\"nested.tar/a/\"") && s.contains("done"), "{s}");
    // The same lines as the command gives.
    let panel = match h.app.panel() {
        pparse_explorer::app::Panel::Query(p) => p.lines().to_vec(),
        _ => panic!("no query panel"),
    };
    let f = fixture_path("nested.tar.gz");
    let run = pparse([
        "query",
        f.to_str().unwrap(),
        "members | select(.kind == \"dir\") | .path",
        "--no-index",
    ]);
    assert_eq!(
        panel,
        run.stdout_text()
            .lines()
            .map(String::from)
            .collect::<Vec<_>>()
    );
    // `:` offers the last filter again; a broken one is refused with where.
    h.keys(":");
    assert!(h.screen().contains("select(.kind"), "{}", h.screen());
    h.keys("<C-u>members | (<Enter>");
    assert!(h.screen().contains("does not compile"), "{}", h.screen());
}
