//! The interactive explorer: three linked panes over a live background parse.
//!
//! One event loop (as in yazi) takes terminal input from an input thread,
//! change notices from the engine, and results from the worker; it drains
//! everything pending, then draws at most once per frame interval, and only
//! when something changed. Nothing on this thread waits for the parse, for
//! I/O or for a search: see [`worker`].

pub mod app;
pub mod draw;
pub mod follow;
pub mod keys;
pub mod layout;
pub mod panel;
pub mod panes;
pub mod readings;
pub mod save;
pub mod search;
pub mod theme;
pub mod widgets;
pub mod worker;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, select, unbounded};
use ratatui::crossterm::event::{self, DisableMouseCapture, EnableMouseCapture, Event};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};

pub use app::App;
use pparse::engine::{Options, Session};
pub use theme::Theme;

/// Shortest time between two frames.
const FRAME: Duration = Duration::from_millis(8);

/// Opens `path` in the explorer; returns when the user quits.
pub fn run(path: &Path, theme: Theme, options: Options) -> io::Result<()> {
    run_session(Arc::new(Session::open(path, options)?), theme)
}

/// Shows an open session (a remote object's) in the explorer; returns
/// when the user quits.
pub fn run_session(session: Arc<Session>, theme: Theme) -> io::Result<()> {
    let mut app = App::new(session.clone(), theme);
    let mut terminal = ratatui::try_init()?;
    execute!(io::stdout(), EnableMouseCapture)?;
    let input = spawn_input();
    let result = event_loop(&mut app, &mut terminal, &input);
    let _ = execute!(io::stdout(), DisableMouseCapture);
    ratatui::restore();
    // Stop the engine now rather than waiting for the worker's handles.
    session.cancel();
    result
}

fn spawn_input() -> Receiver<io::Result<Event>> {
    let (tx, rx) = unbounded();
    std::thread::Builder::new()
        .name("pparse-input".into())
        .spawn(move || {
            loop {
                let ev = event::read();
                let failed = ev.is_err();
                if tx.send(ev).is_err() || failed {
                    return;
                }
            }
        })
        .expect("spawn input thread");
    rx
}

fn event_loop(
    app: &mut App,
    terminal: &mut ratatui::DefaultTerminal,
    input: &Receiver<io::Result<Event>>,
) -> io::Result<()> {
    let engine = app.session.events().clone();
    let done = app.done.clone();
    let mut dirty = true;
    let mut last_draw = Instant::now()
        .checked_sub(FRAME)
        .unwrap_or_else(Instant::now);
    loop {
        if dirty && last_draw.elapsed() >= FRAME {
            execute!(io::stdout(), BeginSynchronizedUpdate)?;
            render(app, terminal)?;
            execute!(io::stdout(), EndSynchronizedUpdate)?;
            if let Some(text) = app.take_clipboard() {
                use std::io::Write;
                let mut out = io::stdout();
                out.write_all(save::osc52(&text).as_bytes())?;
                out.flush()?;
            }
            last_draw = Instant::now();
            dirty = false;
        }
        let wait = if dirty {
            FRAME.saturating_sub(last_draw.elapsed())
        } else {
            Duration::from_millis(250)
        };
        // Block for the first event (or a tick), then drain what is pending.
        select! {
            recv(input) -> ev => handle_input(app, ev.map_err(io::Error::other)??),
            recv(done) -> d => if let Ok(d) = d { app.on_done(d) },
            recv(engine) -> _ => {},
            default(wait) => {},
        }
        while let Ok(ev) = input.try_recv() {
            handle_input(app, ev?);
        }
        while let Ok(d) = done.try_recv() {
            app.on_done(d);
        }
        while engine.try_recv().is_ok() {}
        app.tick();
        if app.quitting() {
            return Ok(());
        }
        dirty = true;
    }
}

/// Draws a frame: lays it out and lets the panes ask for what they show
/// ([`App::prepare`]), then draws from the app unchanged.
pub fn render<B: ratatui::backend::Backend>(
    app: &mut App,
    terminal: &mut ratatui::Terminal<B>,
) -> io::Result<()> {
    let size = terminal
        .size()
        .map_err(|e| io::Error::other(e.to_string()))?;
    app.prepare(ratatui::layout::Rect::new(0, 0, size.width, size.height));
    terminal
        .draw(|f| draw::draw(app, f))
        .map_err(|e| io::Error::other(e.to_string()))?;
    Ok(())
}

fn handle_input(app: &mut App, ev: Event) {
    match ev {
        Event::Key(k) => app.on_key(k),
        Event::Mouse(m) => app.on_mouse(m),
        _ => {}
    }
}
