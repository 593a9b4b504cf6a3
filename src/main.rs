//! The `pparse` binary: the explorer (`pparse FILE`, [`pparse_explorer`])
//! and the headless commands (docs/contract.md is the contract). This crate
//! keeps argument parsing, waiting, exit codes and stderr; what the
//! commands print comes from the library's report layer
//! ([`pparse::report`]).
//!
//! Exit status: 0 when everything looked at is intact, 1 when results are
//! partial (the damage is listed on stderr), 2 for usage errors and files
//! that cannot be read at all.

/// Writes a line to stderr. Unlike `eprintln!` it never panics: with
/// `2>&1 | head` stderr is a closed pipe too, and a closed pipe ends output
/// quietly.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// [`say!`] without the line break (progress lines).
macro_rules! say_inline {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}

mod common;
mod ir;
mod ml;
mod records;

use std::cell::RefCell;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use clap::{CommandFactory, Parser, Subcommand};

use common::{Fatal, Input, finish_output, open, report, resolve_final, wait};
use pparse::engine::{Options, Session};
use pparse::extraction::{ExtId, Phase};
use pparse::parsers::IndexMode;
use pparse::status::Status;
use pparse::unpack::{Existing, Extractor, components};

#[derive(Parser, Debug)]
#[command(
    name = "pparse",
    version,
    about = "Explore and recover nested, huge, truncated or corrupted files",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// File to open in the explorer.
    file: Option<PathBuf>,
    /// Explorer colours: dark, light, high-contrast, or a theme file
    /// (default: $PPARSE_THEME, else dark; NO_COLOR turns colours off).
    #[arg(long, value_name = "NAME")]
    theme: Option<String>,
    /// A .proto file whose message types are added to the builtin ones
    /// (ONNX, W&B); may be given several times.
    #[arg(long, value_name = "FILE", global = true)]
    proto: Vec<PathBuf>,
    /// Read the opened file as this protobuf message type (full name, e.g.
    /// `onnx.TensorProto` or a type from --proto).
    #[arg(long, value_name = "NAME", global = true)]
    message: Option<String>,
    /// Where `tree`, `cat`, `extract` and `mount` keep the index of FILE
    /// (default: a file in $XDG_CACHE_HOME/pparse/index, else
    /// ~/.cache/pparse/index).
    #[arg(long, value_name = "PATH", global = true)]
    index: Option<PathBuf>,
    /// Neither read nor write an index.
    #[arg(long, global = true, conflicts_with = "index")]
    no_index: bool,
    /// Memory for decoded chunks, shared by every reader (e.g. 64M, 1G;
    /// default 16M, or $PPARSE_CACHE_MB megabytes); a gzip file decoded
    /// ahead on a second thread keeps up to 3x more while it is parsed.
    #[arg(
        long,
        value_name = "SIZE",
        global = true,
        allow_negative_numbers = true,
        value_parser = parse_size
    )]
    cache_size: Option<usize>,
    /// At the end, print on stderr what the command read from the file,
    /// decoded, found in the cache, and the time spent decoding and waiting
    /// (one JSON line with --json).
    #[arg(long, global = true)]
    io_stats: bool,
    /// Write every read, decode, cache hit and wait, with its bytes, time
    /// and thread, to FILE as Chrome trace-event JSON (Perfetto and
    /// chrome://tracing open it).
    #[arg(long, global = true, value_name = "FILE")]
    trace_io: Option<PathBuf>,
    /// Threads that decode one large gzip or deflate stream, or the blocks
    /// of a bzip2, xz or zstd stream (default: the cores available; 1
    /// decodes on one thread).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
}

/// `--depth`: a count of levels. Negative numbers reach this parser (not
/// clap's "unexpected argument" with its `-- -1` tip) so that the message
/// says what the option takes.
fn parse_depth(s: &str) -> Result<usize, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("--depth takes a number of levels, 0 or more, not {s:?}"))
}

/// A size with an optional unit: `65536`, `64K`, `64M`, `1G` (powers of 1024).
fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (digits, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: usize = digits
        .trim()
        .parse()
        .map_err(|_| format!("--cache-size takes a size such as 64M or 1G, not {s:?}"))?;
    n.checked_mul(1usize << shift)
        .filter(|&b| b >= 1 << 20)
        .ok_or_else(|| format!("--cache-size {s}: the cache needs at least 1M"))
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// The extraction tree (containers and members) with status.
    Tree {
        file: PathBuf,
        #[arg(long)]
        json: bool,
        /// Only extractions that are not complete, under the containers
        /// that hold them.
        #[arg(long)]
        damaged: bool,
    },
    /// The node tree of one extraction.
    Nodes {
        file: PathBuf,
        /// Extraction PATH (names from the root down joined by `/`).
        path: Option<String>,
        /// Levels of nodes to show (children are loaded on demand).
        #[arg(long, default_value_t = 2, allow_negative_numbers = true, value_parser = parse_depth)]
        depth: usize,
        #[arg(long)]
        json: bool,
    },
    /// The bytes of one extraction, to stdout.
    Cat { file: PathBuf, path: String },
    /// The extraction tree as a read-only file system (FUSE).
    ///
    /// Served at MOUNTPOINT until it is unmounted, Ctrl-C or SIGTERM.
    Mount {
        file: PathBuf,
        mountpoint: PathBuf,
        /// How a member that is a container itself (a jar, .gz or .whl in
        /// a backup) shows: as a folder of what it holds, as the file it
        /// is (so `cp -r` from the mount gives back the archive's files),
        /// or both (`x.jar` and `x.jar.d/`).
        #[arg(long, value_enum, default_value_t = ContainersArg::Folders)]
        containers: ContainersArg,
    },
    /// Pickle opcodes, like `python -m pickletools` (never executes anything).
    Pickle {
        file: PathBuf,
        /// Extraction PATH of the pickle (a torch zip's data.pkl by default).
        path: Option<String>,
        #[arg(long)]
        json: bool,
        /// Show the stack, metastack and memo after each opcode: the top 8
        /// stack items, the innermost metastack frame's top 8, the 8 highest
        /// memo keys, each cut at 120 characters, with "… N more" for the rest.
        #[arg(long)]
        trace: bool,
        /// Positions in decimal, as `python -m pickletools` prints them
        /// (otherwise hex with 0x, as every offset pparse prints).
        #[arg(long)]
        decimal: bool,
        /// Exit 3 if loading a pickle would import anything outside the
        /// allowed set (what it would import is listed on stderr).
        #[arg(long)]
        check: bool,
    },
    /// Tensors of a safetensors or torch file: name, dtype, shape, bytes, status.
    Tensors {
        file: PathBuf,
        path: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Records of a W&B log (.wandb): number, type and a summary.
    ///
    /// Or their full contents; damage is listed where it is found.
    Records {
        file: PathBuf,
        path: Option<String>,
        /// Only records of these types (`history`, `summary`, ...; comma-separated or repeated).
        #[arg(long = "type", value_name = "TYPE", value_delimiter = ',')]
        types: Vec<String>,
        /// Every field of each record, as indented JSON.
        #[arg(long, short)]
        verbose: bool,
        /// JSON Lines: {"number", "type", "offset", "data"} per record.
        #[arg(long)]
        json: bool,
        /// Only the number of records of each type and of damages.
        #[arg(long, conflicts_with = "verbose")]
        count: bool,
    },
    /// A printed Paddle program (`print(program)`, FLAGS_print_ir logs), read back.
    ///
    /// Printed in printer form, one op per line; its errors on stderr as
    /// `file:line:col: error: ...` with the line and a caret.
    Ir {
        file: PathBuf,
        path: Option<String>,
        /// The program tree as JSON: {"programs": [...], "diagnostics": [...]}.
        #[arg(long)]
        json: bool,
        /// Ops counted per name, inside every region.
        #[arg(long)]
        stats: bool,
    },
    /// Run a jq filter over the extraction tree (one compact JSON per line).
    ///
    /// `.` is the extraction at PATH (default: FILE itself) as `tree --json`
    /// writes it, without `children`; `members` is every extraction below
    /// it, depth first, each made as the filter asks for it, e.g.
    /// `pparse query FILE 'members | select(.status != "complete") | .path'`.
    /// jq's language and standard library, by jaq.
    Query {
        file: PathBuf,
        /// The jq filter.
        filter: String,
        path: Option<String>,
    },
    /// Write every leaf extraction below PATH as a file under DIR.
    ///
    /// What pparse can vouch for (intact members, and the recovered part of
    /// cut ones); corrupt members only with --all. FILE is the file (or URL)
    /// to read; PATH the extraction to start from (default: all of FILE);
    /// DIR is created if missing, and nothing is written outside it.
    Extract {
        file: PathBuf,
        path: Option<String>,
        #[arg(long)]
        out: PathBuf,
        /// Also write members whose bytes are corrupt (as they came out).
        #[arg(long)]
        all: bool,
        /// Write members that hold unknown bytes (recovered after deflate
        /// damage) whole, the unknown ranges listed as zeros; without it
        /// only the bytes before the first unknown one are written.
        #[arg(long)]
        with_unknown: bool,
        /// Write members that are containers themselves (a .zip, .whl, .gz
        /// or .npz in an archive) as the files they are, as tar x does,
        /// instead of what they hold.
        #[arg(long)]
        keep_containers: bool,
        /// Leave files already in --out as they are and write the others
        /// (without it, or --rename, nothing is written when any would
        /// land on an existing file).
        #[arg(long, conflicts_with = "rename")]
        skip_existing: bool,
        /// Write members whose name is taken in --out beside the existing
        /// file, as `name~1.ext`.
        #[arg(long)]
        rename: bool,
    },
}

/// `mount --containers`: see [`pparse::fs::mount::Containers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ContainersArg {
    Folders,
    Files,
    Both,
}

/// What `pparse` alone prints (on stderr, exit 2): how to open the explorer
/// and every command with its one-line description, taken from the
/// definitions clap parses with, so the list cannot fall behind them.
fn commands_list() -> String {
    let cmd = Cli::command();
    let subs: Vec<&clap::Command> = cmd
        .get_subcommands()
        .filter(|c| c.get_name() != "help")
        .collect();
    let width = subs.iter().map(|c| c.get_name().len()).max().unwrap_or(0);
    let mut s = String::from(
        "usage: pparse FILE [--theme NAME]    explore FILE (a terminal is needed)\n       \
         pparse COMMAND FILE ...\n\ncommands:\n",
    );
    for c in subs {
        let about = c.get_about().map(|a| a.to_string()).unwrap_or_default();
        s.push_str(&format!("  {:width$}  {about}\n", c.get_name()));
    }
    s.push_str(
        "\n`pparse COMMAND --help` says more of one; `pparse --help` lists the options \
         every command takes.",
    );
    s
}

/// Ends a command line clap refused, with exit status 2 (0 for `--help`
/// and `--version`). Where clap's own words would mislead, they are
/// replaced: it calls a subcommand after `--theme` a conflict, and takes
/// `-1` for an option and suggests `-- -1`.
fn refused(e: clap::Error) -> i32 {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !e.use_stderr() {
        let _ = e.print();
        return 0;
    }
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let cmd = Cli::command();
    let sub = args
        .iter()
        .take_while(|a| *a != "--")
        .find_map(|a| cmd.find_subcommand(a))
        .map(|c| c.get_name().to_string());
    let theme = args
        .iter()
        .any(|a| a == "--theme" || a.starts_with("--theme="));
    let invalid = match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(a)) => Some(a.clone()),
        _ => None,
    };
    let explorer_only = |sub: &str| {
        format!(
            "--theme is for the explorer (`pparse --theme light FILE`); `pparse {sub}` does not take it"
        )
    };
    let plain = match (e.kind(), &sub) {
        (ErrorKind::ArgumentConflict, Some(sub)) if theme => Some(explorer_only(sub)),
        (ErrorKind::UnknownArgument, Some(sub)) => invalid.as_deref().and_then(|arg| {
            let long = arg.strip_prefix("--")?.split('=').next()?;
            if long == "theme" {
                return Some(explorer_only(sub));
            }
            // The commands that do take it.
            let takers: Vec<String> = cmd
                .get_subcommands()
                .filter(|c| c.get_arguments().any(|a| a.get_long() == Some(long)))
                .map(|c| format!("`pparse {}`", c.get_name()))
                .collect();
            (!takers.is_empty()).then(|| {
                format!(
                    "`pparse {sub}` does not take --{long}; {} {}",
                    takers.join(", "),
                    if takers.len() == 1 { "does" } else { "do" }
                )
            })
        }),
        // The value parser's own message says what the option takes.
        (ErrorKind::ValueValidation, _) => std::error::Error::source(&e).map(|s| s.to_string()),
        // `pparse frobnicate x`: clap takes the first word for FILE and
        // complains of the second; the first is the mistake.
        (_, None) => args
            .iter()
            .find(|a| !a.starts_with('-'))
            .filter(|a| !is_input(a))
            .map(|a| not_a_command(a)),
        _ => None,
    };
    match plain {
        Some(msg) => {
            let help = sub.map_or("pparse --help".to_string(), |s| {
                format!("pparse {s} --help")
            });
            say!("pparse: {msg} (see `{help}`)");
        }
        None => {
            let _ = e.print();
        }
    }
    2
}

/// Whether `arg` names something to read: a path that exists, or a URL.
fn is_input(arg: &str) -> bool {
    pparse::data::is_remote_url(arg) || std::fs::symlink_metadata(arg).is_ok()
}

/// What is said of a first word that is neither a command nor a file.
fn not_a_command(word: &str) -> String {
    let cmd = Cli::command();
    let names: Vec<&str> = cmd
        .get_subcommands()
        .map(|c| c.get_name())
        .filter(|n| *n != "help")
        .collect();
    format!(
        "{}: not a command, nor a file that exists; the commands are {}",
        pparse::name::escape_str(word),
        names.join(", ")
    )
}

/// Exit status of a command stopped by a bug (a panic on any thread).
const EXIT_BUG: i32 = 101;

/// Ends the process on a panic in any thread. The engine and the workers
/// run on their own threads; a panic there would otherwise leave the
/// command waiting for results that never come.
fn exit_on_panic() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        say!("pparse: internal error: this is a bug in pparse; the command was stopped");
        std::process::exit(EXIT_BUG);
    }));
}

/// Runs the CLI with the process arguments; returns the exit status.
fn run() -> i32 {
    exit_on_panic();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return refused(e),
    };
    // The library decodes on the asking thread unless told (a process of a
    // DataLoader pool should not start a thread per core); the command
    // uses every core.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    pparse::data::workers::set_threads(cli.threads.map_or(cores, |n| n as usize));
    let mut options = Options::default();
    for p in &cli.proto {
        if let Err(e) = options.schemas.add_proto_file(p) {
            say!("pparse: cannot use --proto {e}");
            return 2;
        }
    }
    if let Some(m) = &cli.message {
        match options.schemas.check_message(m) {
            Ok(name) => options.message = Some(name),
            Err(e) => {
                say!("pparse: --message: {e}");
                return 2;
            }
        }
    }
    // Indexes hold extraction trees, not nodes: the commands that need only
    // the tree use them. The --proto schemas are part of an index's
    // settings (`Options::fingerprint`).
    let uses_index = match &cli.cmd {
        Some(Cmd::Tree { .. } | Cmd::Cat { .. } | Cmd::Extract { .. } | Cmd::Mount { .. }) => true,
        // An index holds no nodes: a filter that walks them parses.
        Some(Cmd::Query { filter, .. }) => !filter.contains("nodes"),
        _ => false,
    };
    if uses_index && !cli.no_index {
        options.index = match cli.index {
            Some(p) => IndexMode::place(p),
            None => IndexMode::Cache,
        };
    }
    if let Some(bytes) = cli.cache_size {
        pparse::data::ChunkCache::global().set_budget(bytes);
    }
    let json_out = match &cli.cmd {
        Some(
            Cmd::Tree { json, .. }
            | Cmd::Nodes { json, .. }
            | Cmd::Pickle { json, .. }
            | Cmd::Tensors { json, .. }
            | Cmd::Records { json, .. }
            | Cmd::Ir { json, .. },
        ) => *json,
        _ => false,
    };
    let io_stats = cli.io_stats;
    let trace_io = cli.trace_io.clone();
    if let Some(path) = &trace_io
        && let Err(e) = pparse::data::trace::start(path)
    {
        say!("pparse: --trace-io {}: {e}", path.display());
        return 2;
    }
    let ledgers = Rc::new(RefCell::new(Vec::new()));
    let input = |file: PathBuf| Input {
        file,
        options: options.clone(),
        ledgers: ledgers.clone(),
    };
    // `pickle --check` found imports outside the allowed set.
    let mut unsafe_imports = false;
    let result = match cli.cmd {
        Some(Cmd::Tree {
            file,
            json,
            damaged,
        }) => tree(&input(file), json, damaged),
        Some(Cmd::Nodes {
            file,
            path,
            depth,
            json,
        }) => nodes(&input(file), path.as_deref().unwrap_or(""), depth, json),
        Some(Cmd::Cat { file, path }) => cat(&input(file), &path),
        Some(Cmd::Query { file, filter, path }) => {
            query(&input(file), &filter, path.as_deref().unwrap_or(""))
        }
        Some(Cmd::Mount {
            file,
            mountpoint,
            containers,
        }) => mount(&input(file), &mountpoint, containers),
        Some(Cmd::Pickle {
            file,
            path,
            json,
            trace,
            decimal,
            check,
        }) => ml::pickle(
            &input(file),
            path.as_deref().unwrap_or(""),
            json,
            pparse::offer::pickle::ListStyle { trace, decimal },
        )
        .map(|(status, imports)| {
            unsafe_imports = check && imports;
            status
        }),
        Some(Cmd::Tensors { file, path, json }) => {
            ml::tensors(&input(file), path.as_deref().unwrap_or(""), json)
        }
        Some(Cmd::Records {
            file,
            path,
            types,
            verbose,
            json,
            count,
        }) => records::records(
            &input(file),
            path.as_deref().unwrap_or(""),
            &pparse::offer::RecordQuery {
                types: &types,
                verbose,
                json,
                count,
            },
        ),
        Some(Cmd::Ir {
            file,
            path,
            json,
            stats,
        }) => {
            let show = match (json, stats) {
                (false, false) => pparse::report::ir::Show::Text,
                (true, false) => pparse::report::ir::Show::Json,
                (false, true) => pparse::report::ir::Show::Stats,
                (true, true) => pparse::report::ir::Show::StatsJson,
            };
            ir::ir(&input(file), path.as_deref().unwrap_or(""), show)
        }
        Some(Cmd::Extract {
            file,
            path,
            out,
            all,
            with_unknown,
            keep_containers,
            skip_existing,
            rename,
        }) => extract(
            &input(file),
            path.as_deref().unwrap_or(""),
            &out,
            Writes {
                all,
                with_unknown,
                keep_containers,
                existing: match (skip_existing, rename) {
                    (true, _) => Some(Existing::Skip),
                    (_, true) => Some(Existing::Rename),
                    _ => None,
                },
            },
        ),
        None => match cli.file {
            // A lone word that is no file is more likely a mistyped command.
            Some(file)
                if !file.as_os_str().as_encoded_bytes().contains(&b'.')
                    && !file.as_os_str().as_encoded_bytes().contains(&b'/')
                    && !is_input(&file.to_string_lossy()) =>
            {
                Err(Fatal::Error(not_a_command(&file.to_string_lossy())))
            }
            Some(file) => explore(&input(file), cli.theme.as_deref()),
            None => {
                say!("{}", commands_list());
                Err(Fatal::Error(String::new()))
            }
        },
    };
    if let Some(path) = &trace_io
        && let Err(e) = pparse::data::trace::stop()
    {
        say!("pparse: --trace-io {}: {e}", path.display());
    }
    let ledgers = ledgers.take();
    for n in ledgers.iter().flat_map(|l| l.take_notes()) {
        say!("pparse: note: {n}");
    }
    if io_stats {
        let mut all = ledgers
            .iter()
            .map(|l| l.io_stats())
            .fold(Default::default(), pparse::data::stats::IoStats::plus);
        // The heap is the process's.
        all.heap_peak = pparse::data::stats::io_stats().heap_peak;
        say!("{}", pparse::report::io_stats(&all, json_out));
    }
    // A read of FILE that failed ends the command as a file that cannot
    // be read does, whatever its parsers made of it.
    let failures = pparse::data::take_read_failures();
    let result = match result {
        Err(fatal) if !failures.is_empty() => {
            for f in &failures {
                if !fatal.message().contains(&f.reason) {
                    say!("pparse: {f}");
                }
            }
            Err(Fatal::Error(fatal.message().to_string()))
        }
        _ if !failures.is_empty() => {
            for f in &failures {
                say!("pparse: {f}");
            }
            Err(Fatal::Error(String::new()))
        }
        r => r,
    };
    match result {
        Ok(_) if unsafe_imports => 3,
        Ok(status) => match status {
            Status::Complete => 0,
            _ => 1,
        },
        Err(fatal) => {
            if !fatal.message().is_empty() {
                say!("pparse: {}", fatal.message());
            }
            fatal.code()
        }
    }
}

fn explore(input: &Input, theme: Option<&str>) -> Result<Status, Fatal> {
    let file = input.file.as_path();
    let theme = pparse_explorer::Theme::from_env(theme).map_err(Fatal::Error)?;
    if !io::stdout().is_terminal() {
        return Err(Fatal::Error(
            "the explorer needs a terminal; use `pparse tree FILE` in pipes".into(),
        ));
    }
    let shown = match input.url() {
        Some(_) => pparse_explorer::run_session(std::sync::Arc::new(open(input)?), theme),
        None => pparse_explorer::run(file, theme, input.options.clone()),
    };
    shown
        .map(|_| Status::Complete)
        .map_err(|e| Fatal::Error(format!("cannot explore {}: {e}", file.display())))
}

fn tree(input: &Input, json: bool, damaged: bool) -> Result<Status, Fatal> {
    use pparse::report::tree as show;
    let session = open(input)?;
    wait(&session, |_| false);
    let t = session.tree();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let keep = damaged.then(|| show::damaged_and_above(&t));
    let r = match (json, &keep) {
        (true, None) => show::tree_json(&t, 0, &mut out),
        (true, Some(k)) => show::tree_json_only(&t, 0, k, &mut out),
        (false, None) => show::tree_text(&t, &mut out),
        (false, Some(k)) => show::tree_text_only(&t, k, &mut out),
    };
    finish_output(r.and_then(|_| out.flush()))?;
    Ok(report(&t, &t.subtree(0)))
}

/// `query`: the filter's outputs, one compact JSON value a line. A filter
/// that does not compile or fails is an error (exit 2); otherwise the
/// exit status is 0, whatever the file holds (its status is in the
/// values).
fn query(input: &Input, filter: &str, path: &str) -> Result<Status, Fatal> {
    let q = pparse::report::query::Query::compile(filter)
        .map_err(|e| Fatal::Error(format!("query: the filter does not compile: {e}")))?;
    let session = open(input)?;
    // A session read from an index is over at once, and its members are
    // read from the index's records: its tree is not built for them.
    let id = if session.is_finished() && path.is_empty() {
        0
    } else {
        wait(&session, |_| false);
        resolve_final(&session, path)?
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let ran = q.run(&session, id, |line| {
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")
    });
    let ran = match ran {
        Ok(ran) => ran,
        Err(e) => return finish_output(Err(e)).map(|()| Status::Complete),
    };
    finish_output(out.flush())?;
    if let Some(why) = ran.error {
        // `members` is a stream, not a field of `.`.
        let hint = if filter.contains(".members") {
            " (`members` is a stream of the extractions: write `members | …`, not `.members[]`)"
        } else {
            ""
        };
        return Err(Fatal::Error(format!("query: {why}{hint}")));
    }
    Ok(Status::Complete)
}

/// Levels `nodes` prints at most: each level costs a frame of the writers
/// and of [`load_depth`], and a line indented by its depth, so a value
/// nested 30,000 deep would cost stack, gigabytes of indentation, and a
/// walk of what is below each level.
const MAX_NODE_DEPTH: usize = 256;

fn nodes(input: &Input, path: &str, depth: usize, json: bool) -> Result<Status, Fatal> {
    let depth = if depth > MAX_NODE_DEPTH {
        say!(
            "pparse: note: --depth {depth} is more than the {MAX_NODE_DEPTH} levels pparse prints; deeper nodes are marked as more"
        );
        MAX_NODE_DEPTH
    } else {
        depth
    };
    let session = open(input)?;
    let id = resolve_final(&session, path)?;
    // The node tree is complete once this extraction's parser is done.
    wait(&session, |t| {
        t.exts[id].phase != Phase::Parsing && t.exts[id].phase != Phase::Waiting
    });
    let count = session.tree().exts[id].nodes.len();
    let data = session.tree().exts[id].data();
    let mut released = 0u64;
    session.cancel();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    // One top-level node at a time: loaded, printed, dropped again, so a
    // tar of a million members never holds a million loaded subtrees.
    let r = (|| -> io::Result<()> {
        {
            let t = session.tree();
            if json {
                pparse::report::tree::nodes_json_open(&t, id, &mut out)?;
            } else {
                pparse::report::tree::nodes_text_head(&t.exts[id], &mut out)?;
            }
        }
        for i in 0..count {
            load_depth(&session, id, &mut vec![i], depth.saturating_sub(1));
            {
                let t = session.tree();
                let n = &t.exts[id].nodes[i];
                if json {
                    if i > 0 {
                        write!(out, ",")?;
                    }
                    pparse::report::tree::node_json(n, depth, &mut out)?;
                } else {
                    pparse::report::tree::node_text(n, 1, depth, &mut out)?;
                }
            }
            session.unload(id, &[i]);
            // Loading read the node's bytes; hand their pages back now and
            // then, as the parse does.
            if let Some(end) = done_with(&session, id, i)
                && end.saturating_sub(released) >= 64 << 20
            {
                data.release(released, end);
                released = end;
            }
        }
        if json {
            pparse::report::tree::nodes_json_close(&mut out)?;
        }
        out.flush()
    })();
    finish_output(r)?;
    let t = session.tree();
    Ok(report(&t, &[id]))
}

/// Where top-level node `i` of extraction `id` ends.
fn done_with(session: &Session, id: ExtId, i: usize) -> Option<u64> {
    Some(session.tree().exts[id].nodes.get(i)?.range.end)
}

fn load_depth(session: &Session, ext: ExtId, path: &mut Vec<usize>, depth: usize) {
    if depth == 0 {
        return;
    }
    session.load(ext, path);
    let n = {
        let t = session.tree();
        let e = &t.exts[ext];
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        e.nodes
            .get(*first)
            .and_then(|n| n.descend(rest))
            .map_or(0, |n| n.loaded_children().len())
    };
    for i in 0..n {
        path.push(i);
        load_depth(session, ext, path, depth - 1);
        path.pop();
    }
}

/// `mount`: the extraction tree as a read-only file system, in the
/// foreground; Ctrl-C, SIGTERM or `umount` ends it, always unmounted.
#[cfg(target_os = "linux")]
fn mount(input: &Input, mountpoint: &Path, containers: ContainersArg) -> Result<Status, Fatal> {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    if !mountpoint.is_dir() {
        return Err(Fatal::Error(format!(
            "cannot mount at {}: not a directory",
            mountpoint.display()
        )));
    }
    let session = Arc::new(open(input)?);
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| Fatal::Error(format!("cannot catch signals: {e}")))?;
    }
    let fs = pparse::fs::Fs::from_session(session.clone());
    let time = pparse::fs::mount::source_time(&input.file);
    say!(
        "pparse: {} mounted read-only at {} (Ctrl-C or umount to end)",
        input.file.display(),
        mountpoint.display()
    );
    use pparse::fs::mount::Containers;
    let containers = match containers {
        ContainersArg::Folders => Containers::Folders,
        ContainersArg::Files => Containers::Files,
        ContainersArg::Both => Containers::Both,
    };
    pparse::fs::mount::serve(fs, mountpoint, time, containers, &stop)
        .map_err(|e| Fatal::Error(format!("cannot mount at {}: {e}", mountpoint.display())))?;
    session.cancel();
    let t = session.tree();
    Ok(t.worst_status())
}

#[cfg(not(target_os = "linux"))]
fn mount(_input: &Input, _mountpoint: &Path, _containers: ContainersArg) -> Result<Status, Fatal> {
    Err(Fatal::Error("mount needs Linux (FUSE)".into()))
}

/// `cat`: the bytes of one extraction, read through the file-system API
/// ([`pparse::fs`]) as a library user reads them.
fn cat(input: &Input, path: &str) -> Result<Status, Fatal> {
    // Only the containers on the way to PATH are parsed (a member's bytes
    // need no verdict on the jars and .gz files beside it). Should the
    // focused parse not find it (a name only the whole parse spells that
    // way), the whole file is parsed.
    let focused = Input {
        file: input.file.clone(),
        options: Options {
            focus: Some(path.to_string()),
            ..input.options.clone()
        },
        ledgers: input.ledgers.clone(),
    };
    let mut session = std::sync::Arc::new(open(&focused)?);
    // Waits with a progress line on a terminal; the API then finds it at
    // once.
    // A member its folder lists under a name of its own (a second member
    // of one name, `lnk2~1`) is found as the mount and `pparse::fs` list
    // it, once the parse is over.
    let listed = |session: &std::sync::Arc<Session>, e: Fatal| {
        pparse::fs::Fs::from_session(session.clone())
            .extraction(path)
            .map_err(|_| e)
    };
    let id = match resolve_final(&session, path) {
        Ok(id) => id,
        Err(_) if !session.from_index() => {
            session.cancel();
            session = std::sync::Arc::new(open(input)?);
            match resolve_final(&session, path) {
                Ok(id) => id,
                Err(e) => listed(&session, e)?,
            }
        }
        Err(e) => listed(&session, e)?,
    };
    session.cancel();
    let fs = pparse::fs::Fs::from_session(session.clone());
    let f = fs.open(path).map_err(|e| Fatal::Error(e.to_string()))?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let copy = |out: &mut io::StdoutLock| -> io::Result<()> {
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        loop {
            let n = f.read_at(at, &mut buf)?;
            if n == 0 {
                return Ok(());
            }
            out.write_all(&buf[..n])?;
            at += n as u64;
        }
    };
    match copy(&mut out).and_then(|()| out.flush()) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(Fatal::Error(format!("cannot read {path}: {e}"))),
    }
    let t = session.tree();
    Ok(report(&t, &[id]))
}

/// Stops `extract` before it writes anything when a file it would write
/// is already in `dir` (a second extraction into the same folder): the
/// user chooses `--skip-existing` or `--rename`. Only a folder that holds
/// something is looked through.
fn refuse_clashes(
    fs: &pparse::fs::Fs,
    path: &str,
    dir: &Path,
    keep_containers: bool,
) -> Result<(), Fatal> {
    let holds_files = std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some());
    if !holds_files {
        return Ok(());
    }
    let mut clashes = Vec::new();
    let mut count = 0usize;
    let mut kept: Vec<Vec<Vec<u8>>> = Vec::new();
    let walked = fs.walk_names(path, |e, names| {
        if kept
            .iter()
            .any(|k| names.len() > k.len() && names.starts_with(k))
        {
            return Ok(());
        }
        // What the extraction below would open and write: bytes.
        let has_bytes = e.kind == pparse::fs::Kind::File;
        if e.container {
            if !(keep_containers && e.member && has_bytes) {
                return Ok(());
            }
            kept.push(names.to_vec());
        }
        if !has_bytes {
            return Ok(());
        }
        let logical: Vec<String> = names.iter().flat_map(|n| components(n)).collect();
        let target = logical.iter().fold(dir.to_path_buf(), |p, c| p.join(c));
        if std::fs::symlink_metadata(&target).is_ok() {
            count += 1;
            if clashes.len() < 5 {
                clashes.push(target.display().to_string());
            }
        }
        Ok(())
    });
    match walked {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Fatal::Error(e.to_string())),
        Err(e) => return Err(Fatal::Error(e.to_string())),
    }
    if count == 0 {
        return Ok(());
    }
    for c in &clashes {
        say!("pparse: {} exists", pparse::name::escape_str(c));
    }
    Err(Fatal::Error(format!(
        "{count} files to write are already in {}: nothing was written; \
         --skip-existing leaves them and writes the rest, --rename writes beside them as name~N",
        dir.display()
    )))
}

/// What `extract` writes besides intact leaves.
struct Writes {
    /// Corrupt members too.
    all: bool,
    /// Members holding unknown bytes whole.
    with_unknown: bool,
    /// Container members as the files they are.
    keep_containers: bool,
    /// What to do with a file already in the folder: `None`, stop before
    /// writing anything.
    existing: Option<Existing>,
}

/// A reader that writes zeros over the given ranges of what it reads:
/// unknown bytes, whatever the decoder made of them.
struct ZeroHoles<R> {
    inner: R,
    holes: Vec<pparse::data::Range>,
    pos: u64,
}

impl<R: io::Read> io::Read for ZeroHoles<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let (start, end) = (self.pos, self.pos + n as u64);
        for h in &self.holes {
            let (a, b) = (h.start.max(start), h.end.min(end));
            if a < b {
                buf[(a - start) as usize..(b - start) as usize].fill(0);
            }
        }
        self.pos = end;
        Ok(n)
    }
}

/// `extract`: every leaf below PATH written under DIR, walked through the
/// file-system API ([`pparse::fs::Fs::walk`]) as a library user walks it.
fn extract(input: &Input, path: &str, dir: &Path, writes: Writes) -> Result<Status, Fatal> {
    let Writes {
        all,
        with_unknown,
        keep_containers,
        existing,
    } = writes;
    use pparse::fs::Kind;
    let session = std::sync::Arc::new(open(input)?);
    // A member listed under a name of its own (`lnk2~1`) is found as
    // `pparse::fs` lists it, once the parse is over.
    let top = match resolve_final(&session, path) {
        Ok(id) => id,
        Err(e) => pparse::fs::Fs::from_session(session.clone())
            .extraction(path)
            .map_err(|_| e)?,
    };
    wait(&session, |_| false);
    let fs = pparse::fs::Fs::from_session(session.clone());
    if existing.is_none() {
        refuse_clashes(&fs, path, dir, keep_containers)?;
    }
    let mut ex = Extractor::new(dir, existing.unwrap_or(Existing::Rename))
        .map_err(|e| Fatal::Error(format!("cannot create {}: {e}", dir.display())))?;
    let mut written = 0u64;
    let mut skipped = Vec::new();
    let mut withheld = Vec::new();
    let mut cut = Vec::new();
    let mut unverified = Vec::new();
    let mut unknown = Vec::new();
    // Members written whole (--keep-containers): what they hold is not.
    let mut kept: Vec<Vec<Vec<u8>>> = Vec::new();
    let walked = fs.walk(path, |e, names, mut file| {
        if kept.iter().any(|k| names.len() > k.len() && names.starts_with(k)) {
            return Ok(());
        }
        if e.container {
            if !(keep_containers && e.member && file.is_some()) {
                return Ok(());
            }
            kept.push(names.to_vec());
        }
        let why = || e.reason.clone().unwrap_or_default();
        let has_content = file.is_some();
        // Bytes a decoder could not know (after deflate damage) are the
        // only fault: the bytes before the first are exact.
        let unknown_at = file.as_ref().and_then(|f| {
            let d = f.damage();
            let only = d.iter().all(|d| d.unknown || d.status != Status::Corrupt);
            let first = d
                .iter()
                .filter(|d| d.unknown && !d.range.is_empty())
                .map(|d| d.range.start)
                .min();
            (only && e.status == Status::Corrupt).then(|| first.unwrap_or(e.size))
        });
        if let (Some(at), Some(f)) = (unknown_at, file.as_mut())
            && !all
        {
            let ranges: Vec<String> = f
                .damage()
                .iter()
                .filter(|d| d.unknown)
                .map(|d| d.range.to_string())
                .collect();
            let logical: Vec<String> = names.iter().flat_map(|n| components(n)).collect();
            let shown = ranges.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
            let more = ranges.len().saturating_sub(8);
            let more = if more > 0 { format!(" and {more} more") } else { String::new() };
            if with_unknown {
                let holes: Vec<_> = f
                    .damage()
                    .iter()
                    .filter(|d| d.unknown)
                    .map(|d| d.range)
                    .collect();
                let mut zeroed = ZeroHoles {
                    inner: f,
                    holes,
                    pos: 0,
                };
                let done = ex
                    .write_from(&logical, &mut zeroed)
                    .map_err(|err| io::Error::other(format!("cannot write {}: {err}", e.path)))?;
                if done.is_some() {
                    unknown.push(format!("{}: unknown bytes written as zeros at {shown}{more}", e.path));
                    written += 1;
                }
            } else {
                let done = ex
                    .write_from(&logical, &mut io::Read::take(f, at))
                    .map_err(|err| io::Error::other(format!("cannot write {}: {err}", e.path)))?;
                if done.is_some() {
                    unknown.push(format!(
                        "{}: {at} of {} bytes written, up to the first unknown byte (unknown: {shown}{more})",
                        e.path, e.size
                    ));
                    written += 1;
                }
            }
            return Ok(());
        }
        match e.status {
            Status::Corrupt if !all && has_content => {
                withheld.push(format!("{}: {}", e.path, why()));
                return Ok(());
            }
            Status::Complete => {}
            Status::Unverified if has_content => {
                unverified.push(format!("{}: {}", e.path, why()));
            }
            _ if has_content => cut.push(format!("{}: {}", e.path, why())),
            _ => {}
        }
        let logical: Vec<String> = names.iter().flat_map(|n| components(n)).collect();
        match (&e.kind, file) {
            (Kind::Dir, _) => {
                if let Err(err) = ex.dir(&logical) {
                    say!("pparse: cannot create directory for {}: {err}", e.path);
                }
            }
            (_, Some(mut f)) => {
                let done = ex
                    .write_from(&logical, &mut f)
                    .map_err(|err| io::Error::other(format!("cannot write {}: {err}", e.path)))?;
                written += u64::from(done.is_some());
            }
            (Kind::Symlink(target), None) => {
                skipped.push(format!("{} (symlink to {target})", e.path));
            }
            (Kind::HardLink(target), None) => {
                skipped.push(format!("{} (hardlink to {target})", e.path));
            }
            (Kind::Other(k), None) => skipped.push(format!("{} ({k})", e.path)),
            (Kind::File, None) => skipped.push(format!("{} (file)", e.path)),
        }
        Ok(())
    });
    match walked {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(Fatal::Error(e.to_string())),
        Err(e) => return Err(Fatal::Error(e.to_string())),
    }
    let t = session.tree();
    let (kept_old, beside) = ex.clashes();
    if kept_old > 0 {
        say!(
            "pparse: {kept_old} files already in {} were left as they are (--skip-existing)",
            dir.display()
        );
    }
    if beside > 0 {
        say!(
            "pparse: {beside} files were written beside files of the same name already in {}, as name~N (--rename)",
            dir.display()
        );
    }
    if !skipped.is_empty() {
        say!(
            "pparse: {} entries are not regular files and were not written (links are never created):",
            skipped.len()
        );
        for s in skipped.iter().take(20) {
            say!("  {s}");
        }
    }
    for (list, what) in [
        (&cut, "were cut short; their recovered bytes were written"),
        (
            &unverified,
            "decoded without an error, but a check over them failed: written, unverified",
        ),
        (
            &unknown,
            if with_unknown {
                "hold bytes pparse could not know (after deflate damage); written whole"
            } else {
                "hold bytes pparse could not know (after deflate damage); the bytes before the first were written (--with-unknown writes them whole, as zeros)"
            },
        ),
        (
            &withheld,
            "hold bytes pparse cannot vouch for and were not written (--all writes them)",
        ),
    ] {
        if !list.is_empty() {
            say!("pparse: {} files {what}:", list.len());
            for s in list.iter().take(20) {
                say!("  {s}");
            }
            if list.len() > 20 {
                say!("  ... and {} more", list.len() - 20);
            }
        }
    }
    say!(
        "pparse: wrote {written} files under {}",
        ex.root().display()
    );
    Ok(report(&t, &t.subtree(top)))
}

// Counted, for `--io-stats`' peak heap.
#[global_allocator]
static HEAP: pparse::data::stats::CountingAlloc = pparse::data::stats::CountingAlloc;

fn main() {
    std::process::exit(run());
}
