//! `pparse._pparse`: the Rust half of the Python package.
//!
//! It is a thin layer over the library's file-system API ([`pparse::fs`]),
//! its tensor views ([`pparse::view`]) and its reports ([`pparse::report`], the
//! contract's shapes), so that Python sees what `pparse` prints. The
//! Python half (`pparse/__init__.py`) turns its answers into the objects
//! Python users expect (file objects, numpy arrays).
//!
//! Every call that waits for a parse or reads bytes releases the GIL.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Mutex;

mod records;

use pparse::Options;
use pparse::parsers::IndexMode;

use pparse::data::{Data, Range};
use pparse::extraction::{ExtId, Tree};
use pparse::fs::{self as pfs, Entry, Fs, Kind};
use pparse::offer::LogEntry;
use pparse::offer::pickle::{Arg, OpError, Opcode, Payload, PickleOffer};
use pparse::offer::tensor::{Dtype, Encoding, Tensor as RTensor};
use pparse::status::Status;
use pparse::view::tensors;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyTuple};

// The exceptions are named in `pparse`, which re-exports them, so a worker
// process's error pickles back to its parent (`multiprocessing` sends it
// by its module and name).

create_exception!(
    pparse,
    Error,
    PyException,
    "Anything pparse could not do, with the PATH it concerns."
);
create_exception!(
    pparse,
    NotFound,
    Error,
    "Nothing is named PATH; the message says what is there instead."
);
create_exception!(
    pparse,
    NotAContainer,
    Error,
    "PATH holds no entries to list or descend into."
);
create_exception!(
    pparse,
    NoContent,
    Error,
    "PATH has no bytes of its own (a directory, a link)."
);
create_exception!(
    pparse,
    DamagedError,
    Error,
    "The bytes asked for are damaged: `offset`, `reason` and `status` say where and why."
);

/// A Python exception for a file-system error, with `path` (and for
/// damage `offset`, `reason`, `status`) as attributes.
fn fs_error(py: Python<'_>, e: pfs::Error) -> PyErr {
    let msg = e.to_string();
    let err = match e {
        pfs::Error::Open { source, .. } => {
            return PyOSError::new_err((source.raw_os_error().unwrap_or(0), msg));
        }
        pfs::Error::NotFound { path, .. } => (NotFound::new_err(msg), path),
        pfs::Error::NotAContainer { path } => (NotAContainer::new_err(msg), path),
        pfs::Error::NoContent { path, .. } => (NoContent::new_err(msg), path),
        pfs::Error::Damaged {
            path,
            offset,
            reason,
            status,
        } => return damaged(py, msg, &path, offset, &reason, status),
    };
    // An exception instance has a __dict__: setting an attribute cannot fail.
    let _ = err.0.value(py).setattr("path", err.1);
    err.0
}

/// A `DamagedError` saying where and why.
fn damaged(
    py: Python<'_>,
    msg: String,
    path: &str,
    offset: u64,
    reason: &str,
    status: Status,
) -> PyErr {
    let err = DamagedError::new_err(msg);
    let v = err.value(py);
    let _ = v.setattr("path", path);
    let _ = v.setattr("offset", offset);
    let _ = v.setattr("reason", reason);
    let _ = v.setattr("status", status.as_str());
    err
}

fn io_error(e: io::Error) -> PyErr {
    PyOSError::new_err(e.to_string())
}

/// The opened file or URL: its containers as a file system.
#[pyclass(module = "pparse._pparse", frozen)]
struct Source {
    fs: Mutex<Option<Fs>>,
}

impl Source {
    /// Waits, without the GIL, until `ready` holds for the extraction at
    /// PATH (or the parse is over), then answers with `f` under the tree's
    /// lock.
    fn when<T: Send>(
        &self,
        py: Python<'_>,
        path: &str,
        ready: impl Fn(&Tree, ExtId) -> bool + Sync,
        f: impl FnOnce(&Tree, ExtId) -> T + Send,
    ) -> PyResult<T> {
        let fs = self.fs()?;
        py.detach(|| -> Result<T, pfs::Error> {
            let id = fs.extraction(path)?;
            let s = fs.session();
            s.wait_until(|t| ready(t, id));
            Ok(f(&s.tree(), id))
        })
        .map_err(|e| fs_error(py, e))
    }

    fn fs(&self) -> PyResult<Fs> {
        self.fs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| PyValueError::new_err("I/O operation on a closed pparse source"))
    }
}

#[pymethods]
impl Source {
    /// The extraction tree below PATH as `pparse tree --json` prints it,
    /// once it is parsed: a JSON text.
    #[pyo3(signature = (path = ""))]
    fn tree_json(&self, py: Python<'_>, path: &str) -> PyResult<String> {
        let out = self.when(
            py,
            path,
            |_, _| false,
            |t, id| {
                let mut out = Vec::new();
                pparse::report::tree::tree_json(t, id, &mut out).map(|()| out)
            },
        )?;
        String::from_utf8(out.map_err(io_error)?).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// This source's own counters, as `io_stats` gives the process's: what
    /// reading it cost, apart from every other source open beside it.
    fn io_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        stats_dict(py, &self.fs()?.session().io_stats())
    }

    /// The entries in PATH as dicts; with `recursive`, every entry below.
    #[pyo3(signature = (path = "", recursive = false))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        path: &str,
        recursive: bool,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let fs = self.fs()?;
        let entries = py
            .detach(|| fs.list(path, recursive))
            .map_err(|e| fs_error(py, e))?;
        entries.iter().map(|e| entry_dict(py, e)).collect()
    }

    /// The entry at PATH as a dict.
    fn stat<'py>(&self, py: Python<'py>, path: &str) -> PyResult<Bound<'py, PyDict>> {
        let fs = self.fs()?;
        let e = py.detach(|| fs.stat(path)).map_err(|e| fs_error(py, e))?;
        entry_dict(py, &e)
    }

    /// The bytes at PATH, opened for reading (what was recovered of a
    /// damaged member; its `status` says what it is). With `complete`, a
    /// damaged member raises `DamagedError` instead.
    #[pyo3(signature = (path, complete = false))]
    fn open(&self, py: Python<'_>, path: &str, complete: bool) -> PyResult<File> {
        let fs = self.fs()?;
        let f = py
            .detach(|| {
                if complete {
                    fs.open_complete(path)
                } else {
                    fs.open(path)
                }
            })
            .map_err(|e| fs_error(py, e))?;
        Ok(File {
            inner: Mutex::new(Some(f)),
        })
    }

    /// A source rooted at PATH: its paths are relative to it.
    fn sub(&self, py: Python<'_>, path: &str) -> PyResult<Source> {
        let fs = self.fs()?;
        let sub = py.detach(|| fs.sub(path)).map_err(|e| fs_error(py, e))?;
        Ok(Source {
            fs: Mutex::new(Some(sub)),
        })
    }

    /// The tensors at or below PATH, as `pparse tensors` lists them.
    #[pyo3(signature = (path = ""))]
    fn tensors(&self, py: Python<'_>, path: &str) -> PyResult<Vec<Tensor>> {
        self.when(py, path, tensors::ready, |t, id| {
            tensors::collect(t, id)
                .into_iter()
                .filter_map(|x| {
                    let e = t.get(x.source)?;
                    Some(Tensor {
                        source: t.path_of(x.source),
                        data: e.data(),
                        t: x,
                    })
                })
                .collect()
        })
    }

    /// The records of the log (`.wandb`) at or below PATH, read by a
    /// thread in batches as they are taken: an iterator of lists of dicts
    /// (`number`, `type`, `offset`, `data`) and `Damage` objects.
    #[pyo3(signature = (path = "", types = Vec::new()))]
    fn records(
        &self,
        py: Python<'_>,
        path: &str,
        types: Vec<String>,
    ) -> PyResult<records::Records> {
        let found = self.when(py, path, pparse::view::records::ready, |t, id| {
            pparse::view::records::log_target(t, id)
                .map(|(x, offer)| (offer, t.exts[x].data(), outer_damage(t, x)))
        })?;
        let Some((offer, data, outer)) = found else {
            return Err(not_a(py, path, "a W&B log (.wandb): no records to read"));
        };
        Ok(records::Records::start(offer, data, types, outer))
    }

    /// The opcodes of the pickle at or below PATH (a `.pkl`, a torch
    /// checkpoint's `data.pkl`) as `pickletools.genops` reads them.
    #[pyo3(signature = (path = ""))]
    fn pickle_ops(&self, py: Python<'_>, path: &str) -> PyResult<PickleOps> {
        let found = self.when(py, path, pparse::view::stepper::pickles_ready, |t, id| {
            let (x, ranges) = pparse::view::stepper::pickles(t, id)?;
            let offer = pparse::report::pickle::offer(&t.exts[x])?;
            let label = match x {
                0 => t.exts[0].display_name(),
                _ => t.path_of(x),
            };
            Some((offer, t.exts[x].data(), label, ranges))
        })?;
        let Some((offer, data, source, ranges)) = found else {
            return Err(not_a(py, path, "a pickle"));
        };
        let pos = ranges.first().map_or(0, |r| r.start);
        Ok(PickleOps {
            state: Mutex::new(Steps {
                offer,
                data,
                source,
                ranges,
                at: 0,
                pos,
                scratch: Vec::new(),
            }),
        })
    }

    /// The programs of the Paddle IR text (or saved `.json` program) at
    /// PATH as `pparse ir --json` prints them: a JSON text.
    #[pyo3(signature = (path = ""))]
    fn ir_json(&self, py: Python<'_>, path: &str) -> PyResult<String> {
        let data = self.when(
            py,
            path,
            |t, id| t.exts[id].is_final(),
            |t, id| t.exts[id].data(),
        )?;
        let out = py.detach(|| {
            let mut out = Vec::new();
            pparse::report::ir::json(&*data, &mut out).map(|()| out)
        });
        String::from_utf8(out.map_err(io_error)?).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// Stops the parse and lets go of the file: later calls raise.
    fn close(&self) {
        if let Some(fs) = self.fs.lock().unwrap_or_else(|e| e.into_inner()).take() {
            fs.session().cancel();
        }
    }

    /// The identity of this version of the file or object (see the
    /// Python `Source.fingerprint`).
    fn fingerprint(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let fs = self.fs()?;
        py.detach(|| fs.session().fingerprint()).map_err(io_error)
    }

    /// Whether the background parse is still going.
    #[getter]
    fn parsing(&self) -> PyResult<bool> {
        Ok(!self.fs()?.session().is_finished())
    }

    /// Whether the whole extraction tree is in memory (see
    /// `Session::tree_is_built`).
    #[getter]
    fn tree_loaded(&self) -> PyResult<bool> {
        Ok(self.fs()?.session().tree_is_built())
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.fs.lock().unwrap_or_else(|e| e.into_inner()).is_none()
    }
}

fn entry_dict<'py>(py: Python<'py>, e: &Entry) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("path", &e.path)?;
    d.set_item("name", &e.name)?;
    let (kind, target) = match &e.kind {
        Kind::File => ("file", None),
        Kind::Dir => ("dir", None),
        Kind::Symlink(t) => ("symlink", Some(t.as_str())),
        Kind::HardLink(t) => ("hardlink", Some(t.as_str())),
        Kind::Other(k) => (k.as_str(), None),
    };
    d.set_item("kind", kind)?;
    if let Some(t) = target {
        d.set_item("target", t)?;
    }
    d.set_item("size", e.size)?;
    d.set_item("declared_size", e.declared_size)?;
    d.set_item("status", e.status.as_str())?;
    d.set_item("detail", &e.reason)?;
    d.set_item("container", e.container)?;
    d.set_item("member", e.member)?;
    d.set_item("parser", e.format)?;
    d.set_item("mtime", e.mtime)?;
    d.set_item("mode", e.mode)?;
    Ok(d)
}

/// The process's input and output counters, as `pparse --io-stats`
/// prints them: bytes read from files, decoded (first passes and again
/// from checkpoints), served from the cache, and seconds spent decoding
/// and waiting. They only grow: measure work as a difference.
#[pyfunction]
fn io_stats(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = stats_dict(py, &pparse::data::stats::io_stats())?;
    let remote = pparse::data::remote_stats();
    d.set_item("remote_requests", remote.requests)?;
    d.set_item("remote_bytes", remote.bytes_fetched)?;
    Ok(d)
}

fn stats_dict<'py>(
    py: Python<'py>,
    s: &pparse::data::stats::IoStats,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("file_read", s.file_read)?;
    d.set_item("decoded", s.decoded)?;
    d.set_item("redecoded", s.redecoded)?;
    d.set_item("decoded_ahead", s.ahead)?;
    d.set_item("from_cache", s.from_cache)?;
    d.set_item("decoding_s", s.decoding.as_secs_f64())?;
    d.set_item("waiting_s", s.waiting.as_secs_f64())?;
    Ok(d)
}

/// How many threads decode one large gzip stream of an opened file (see
/// `pparse --threads`), for this process: 1 (the default) decodes on the
/// thread that reads. A process of a data loader's pool should keep 1.
#[pyfunction]
fn set_threads(n: usize) -> PyResult<()> {
    if n == 0 {
        return Err(PyValueError::new_err("threads must be at least 1"));
    }
    pparse::data::workers::set_threads(n);
    Ok(())
}

/// The threads set by `set_threads`.
#[pyfunction]
fn threads() -> usize {
    pparse::data::workers::threads()
}

/// Starts writing this process's I/O trace to `path`, as Chrome
/// trace-event JSON (`pparse --trace-io`).
#[pyfunction]
fn trace_io_start(path: PathBuf) -> PyResult<()> {
    pparse::data::trace::start(&path).map_err(io_error)
}

/// Ends the I/O trace and closes its file.
#[pyfunction]
fn trace_io_stop() -> PyResult<()> {
    pparse::data::trace::stop().map_err(io_error)
}

/// Opens a file, a folder or an `http(s)://` / `s3://` URL and starts
/// parsing it in the background. `index`: `None` (nothing is written),
/// `True` (the user's cache folder, as the command does), a file path, a
/// folder (shared: see `IndexMode::In`) or an `s3://`/`http(s)://` URL.
#[pyfunction]
#[pyo3(signature = (path, index = None))]
fn open(py: Python<'_>, path: PathBuf, index: Option<Bound<'_, PyAny>>) -> PyResult<Source> {
    let index = match index {
        None => IndexMode::Off,
        Some(i) if i.is_instance_of::<PyBool>() => match i.extract::<bool>()? {
            true => IndexMode::Cache,
            false => IndexMode::Off,
        },
        Some(i) => IndexMode::place(i.extract::<PathBuf>()?),
    };
    let options = Options {
        index,
        ..Options::default()
    };
    let fs = py
        .detach(|| Fs::with_options(&path, options))
        .map_err(|e| fs_error(py, e))?;
    Ok(Source {
        fs: Mutex::new(Some(fs)),
    })
}

/// What the containers holding extraction `x` say of its bytes (a gzip
/// stream corrupt inside it, bytes short of its declared size): the log's
/// reader cannot see it.
fn outer_damage(t: &pparse::extraction::Tree, x: pparse::extraction::ExtId) -> Vec<LogEntry> {
    let e = &t.exts[x];
    let mut out: Vec<LogEntry> = e
        .outer_damage()
        .iter()
        .filter_map(|&i| e.damage.get(i as usize))
        .map(|d| LogEntry::Damage {
            status: d.status,
            range: d.range,
            reason: d.reason.clone(),
        })
        .collect();
    if let Some(declared) = e.declared_size()
        && e.size() < declared
    {
        out.push(LogEntry::Damage {
            status: Status::Truncated,
            range: Range::new(e.size(), declared),
            reason: format!(
                "its container declares {declared} bytes; {} are here",
                e.size()
            ),
        });
    }
    out
}

/// `NotAContainer`-like error for a PATH that holds no such thing.
fn not_a(py: Python<'_>, path: &str, what: &str) -> PyErr {
    let shown = if path.is_empty() { "the source" } else { path };
    let err = Error::new_err(format!("{shown} is not {what}"));
    let _ = err.value(py).setattr("path", path);
    err
}

/// Where the opcode listing of a pickle is.
struct Steps {
    /// How the pickles' format reads an opcode.
    offer: PickleOffer,
    data: Data,
    /// The PATH of the extraction holding the pickles.
    source: String,
    /// The pickles, in order.
    ranges: Vec<Range>,
    /// The pickle being read.
    at: usize,
    /// The next opcode's offset.
    pos: u64,
    scratch: Vec<u8>,
}

/// The opcodes of a pickle, one by one.
#[pyclass(module = "pparse._pparse", frozen)]
struct PickleOps {
    state: Mutex<Steps>,
}

#[pymethods]
impl PickleOps {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// `(pos, op, arg)`; a pickle that is cut or holds a byte that is no
    /// opcode raises `DamagedError` where it goes wrong.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *g;
        let Some(r) = st.ranges.get(st.at).copied() else {
            return Ok(None);
        };
        // A pickle node ends at its STOP or where its reading stopped; the
        // opcode after that is read again here, bounded by the next pickle
        // or the end of the bytes, to say what is wrong with it.
        let end = match st.ranges.get(st.at + 1) {
            Some(next) => next.start,
            None => st.data.available(),
        }
        .max(r.end);
        if st.pos >= end {
            let (at, source) = (st.pos, st.source.clone());
            st.at = st.ranges.len();
            let msg = format!("{source}: truncated at {at}: the bytes end before STOP");
            return Err(damaged(
                py,
                msg,
                &source,
                at,
                "the bytes end before STOP",
                Status::Truncated,
            ));
        }
        let (data, pos) = (st.data.clone(), st.pos);
        let (scratch, opcode) = (&mut st.scratch, st.offer.opcode);
        let op = py.detach(|| opcode(&*data, pos, end, scratch));
        let op = match op {
            Ok(op) => op,
            Err(bad) => {
                let (status, why) = match bad {
                    OpError::Short(w) => (Status::Truncated, w),
                    OpError::Invalid(w) => (Status::Corrupt, w),
                };
                st.at = st.ranges.len();
                let source = st.source.clone();
                let msg = format!("{source}: {status} at {pos}: {why}");
                return Err(damaged(py, msg, &source, pos, &why, status));
            }
        };
        st.pos += op.len;
        if op.name == "STOP" {
            st.at += 1;
            if let Some(next) = st.ranges.get(st.at) {
                st.pos = next.start;
            }
        }
        let arg = pickle_arg(py, &op, &*st.data)?;
        Ok(Some((op.pos, op.name, arg).into_pyobject(py)?))
    }
}

/// An opcode's argument as `pickletools.genops` gives it: `str`, `bytes`,
/// `bytearray`, `int`, `float`, `bool` or `None`.
fn pickle_arg<'py>(
    py: Python<'py>,
    op: &Opcode,
    data: &dyn pparse::data::Source,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(match &op.arg {
        Arg::None => py.None().into_bound(py),
        Arg::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Arg::Int(v) => v.into_pyobject(py)?.into_any(),
        Arg::Big(s) => py.get_type::<pyo3::types::PyInt>().call1((&**s,))?,
        Arg::Float(f) => f.into_pyobject(py)?.into_any(),
        Arg::Text(t) => (&**t).into_pyobject(py)?.into_any(),
        Arg::Payload(kind, r) => {
            // The op was decoded, so its payload lies within the bytes.
            let mut buf = vec![0u8; r.len() as usize];
            let got = py
                .detach(|| data.read_at(r.start, &mut buf))
                .map_err(io_error)?;
            buf.truncate(got);
            match kind {
                Payload::Bytes => PyBytes::new(py, &buf).into_any(),
                Payload::ByteArray => pyo3::types::PyByteArray::new(py, &buf).into_any(),
                Payload::Latin1 => buf
                    .iter()
                    .map(|&c| c as char)
                    .collect::<String>()
                    .into_pyobject(py)?
                    .into_any(),
                // pickletools decodes with 'surrogatepass'.
                Payload::Utf8 => {
                    PyBytes::new(py, &buf).call_method1("decode", ("utf-8", "surrogatepass"))?
                }
            }
        }
    })
}

/// The bytes of one entry: positional reads, or reads from a position.
#[pyclass(module = "pparse._pparse", frozen)]
struct File {
    inner: Mutex<Option<pfs::File>>,
}

impl File {
    fn with<T>(&self, f: impl FnOnce(&mut pfs::File) -> T) -> PyResult<T> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(file) => Ok(f(file)),
            None => Err(PyValueError::new_err("I/O operation on a closed file")),
        }
    }
}

#[pymethods]
impl File {
    /// Up to `size` bytes from the current position (all that is left when
    /// `size` is negative).
    #[pyo3(signature = (size = -1))]
    fn read<'py>(&self, py: Python<'py>, size: i64) -> PyResult<Bound<'py, PyBytes>> {
        let buf = py.detach(|| {
            self.with(|f| -> io::Result<Vec<u8>> {
                let pos = f.stream_position()?;
                let left = f.len().saturating_sub(pos);
                let want = u64::try_from(size).map_or(left, |s| s.min(left));
                let mut buf = vec![0u8; usize::try_from(want).map_err(io::Error::other)?];
                let mut done = 0;
                while done < buf.len() {
                    let n = f.read(&mut buf[done..])?;
                    if n == 0 {
                        break;
                    }
                    done += n;
                }
                buf.truncate(done);
                Ok(buf)
            })
        })?;
        Ok(PyBytes::new(py, &buf.map_err(io_error)?))
    }

    /// Moves the position as `io.IOBase.seek` does; returns it.
    #[pyo3(signature = (offset, whence = 0))]
    fn seek(&self, offset: i64, whence: i32) -> PyResult<u64> {
        let to =
            match whence {
                0 => SeekFrom::Start(u64::try_from(offset).map_err(|_| {
                    PyValueError::new_err(format!("negative seek position {offset}"))
                })?),
                1 => SeekFrom::Current(offset),
                2 => SeekFrom::End(offset),
                _ => return Err(PyValueError::new_err(format!("invalid whence ({whence})"))),
            };
        self.with(|f| f.seek(to))?.map_err(io_error)
    }

    /// The current position.
    fn tell(&self) -> PyResult<u64> {
        self.with(|f| f.stream_position())?.map_err(io_error)
    }

    /// Its length: the bytes present.
    #[getter]
    fn size(&self) -> PyResult<u64> {
        self.with(|f| f.len())
    }

    /// `complete`, `truncated` or `corrupt`.
    #[getter]
    fn status(&self) -> PyResult<&'static str> {
        self.with(|f| f.status().as_str())
    }

    /// The damage in it, as (start, end, status, reason) in its own
    /// offsets.
    #[getter]
    fn damage(&self) -> PyResult<Vec<(u64, u64, &'static str, String)>> {
        self.with(|f| {
            f.damage()
                .iter()
                .map(|d| {
                    (
                        d.range.start,
                        d.range.end,
                        d.status.as_str(),
                        d.reason.clone(),
                    )
                })
                .collect()
        })
    }

    /// Lets go of the bytes.
    fn close(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// One tensor of a checkpoint, model or array file.
#[pyclass(module = "pparse._pparse", frozen)]
struct Tensor {
    t: RTensor,
    /// The PATH of the extraction holding its bytes.
    source: String,
    data: Data,
}

#[pymethods]
impl Tensor {
    /// Its name in the file (`model.layers.0.weight`).
    #[getter]
    fn name(&self) -> &str {
        &self.t.name
    }

    /// Its element type as `pparse tensors` spells it (`F32`, `BF16`,
    /// `Q4_K`, `M8[ns]`).
    #[getter]
    fn dtype(&self) -> String {
        self.t.dtype.name().into_owned()
    }

    /// Dimensions, outermost first.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.t.shape)
    }

    /// Strides in elements, when the format gives them (torch, Fortran
    /// order); `None` for C order.
    #[getter]
    fn stride<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.t
            .stride
            .as_ref()
            .map(|s| PyTuple::new(py, s))
            .transpose()
    }

    /// The PATH of the extraction holding its bytes.
    #[getter]
    fn source(&self) -> &str {
        &self.source
    }

    /// Byte offset of its first element in `source`.
    #[getter]
    fn offset(&self) -> u64 {
        self.t.offset
    }

    /// Bytes it spans in `source`.
    #[getter]
    fn length(&self) -> u64 {
        self.t.length
    }

    /// `complete`, `truncated` or `corrupt`.
    #[getter]
    fn status(&self) -> &'static str {
        self.t.status.as_str()
    }

    /// Why it is not complete.
    #[getter]
    fn detail(&self) -> Option<&str> {
        self.t.detail.as_deref()
    }

    /// Whether its bytes are big-endian.
    #[getter]
    fn big_endian(&self) -> bool {
        self.t.big_endian
    }

    /// Its bytes as an object numpy takes (`__array_interface__`) and the
    /// name of the `ml_dtypes` type to view them as, if any: the mapped
    /// bytes themselves when they can be (whole bytes numpy has a type for,
    /// in a mapped file, aligned, `upcast` false), else a copy decoded as
    /// the `.npy` export decodes it (block-quantized and sub-byte types to
    /// float32). Raises `DamagedError` when bytes are missing, or when
    /// they are corrupt or unverified and `strict`.
    #[pyo3(signature = (strict = true, upcast = false))]
    fn array(
        &self,
        py: Python<'_>,
        strict: bool,
        upcast: bool,
    ) -> PyResult<(Array, Option<&'static str>)> {
        let t = &self.t;
        let missing = t.status == Status::Truncated;
        if missing || (strict && matches!(t.status, Status::Corrupt | Status::Unverified)) {
            let reason = t
                .detail
                .clone()
                .unwrap_or_else(|| format!("{} of its bytes are damaged", t.length));
            let msg = format!("tensor {}: {}: {reason}", t.name, t.status.as_str());
            return Err(damaged(py, msg, &self.source, t.offset, &reason, t.status));
        }
        // Varints are decoded into a copy.
        let native = if upcast || t.encoding != Encoding::Raw {
            None
        } else {
            pparse::view::values::numpy_native(t.dtype, t.big_endian)
        };
        if let Some((typestr, ext)) = native {
            return Ok((self.direct(py, typestr.into_owned())?, ext));
        }
        let data = self.data.clone();
        let body = py.detach(|| {
            let mut out = Vec::new();
            pparse::view::values::write_npy_data(t, &*data, &mut out).map(|()| out)
        });
        let body = body.map_err(|e| {
            let msg = format!("tensor {}: {e}", t.name);
            match e.kind() {
                io::ErrorKind::UnexpectedEof => damaged(
                    py,
                    msg,
                    &self.source,
                    t.offset,
                    &e.to_string(),
                    Status::Truncated,
                ),
                // A type whose values pparse cannot decode (some GGML types).
                _ => Error::new_err(msg),
            }
        })?;
        let typestr = pparse::view::values::npy_descr(t.dtype).into_owned();
        Ok((Array::owned(body, typestr, t.shape.clone(), None), None))
    }
}

impl Tensor {
    /// The tensor's own bytes, shared with the mapping or read once.
    fn direct(&self, py: Python<'_>, typestr: String) -> PyResult<Array> {
        let t = &self.t;
        let bad = |why: String| {
            let msg = format!("tensor {}: {why}", t.name);
            damaged(py, msg, &self.source, t.offset, &why, Status::Corrupt)
        };
        let item = t.dtype.bits() / 8;
        // The bytes the elements reach, from element 0.
        let span = match &t.stride {
            Some(s) if s.len() == t.shape.len() => {
                if t.shape.contains(&0) {
                    0
                } else {
                    let last = t
                        .shape
                        .iter()
                        .zip(s)
                        .try_fold(0u64, |a, (&n, &st)| a.checked_add((n - 1).checked_mul(st)?));
                    last.and_then(|l| l.checked_add(1)?.checked_mul(item))
                        .ok_or_else(|| bad("its strides overflow".into()))?
                }
            }
            _ => t
                .numel()
                .checked_mul(item)
                .ok_or_else(|| bad("its size overflows".into()))?,
        };
        if span > t.length
            || t.offset
                .checked_add(span)
                .is_none_or(|e| e > self.data.available())
        {
            return Err(bad(format!(
                "its elements reach {span} bytes from offset {}, past its {} bytes",
                t.offset, t.length
            )));
        }
        let strides = match &t.stride {
            Some(s) if s.len() == t.shape.len() => Some(
                s.iter()
                    .map(|&st| st.checked_mul(item).and_then(|b| i64::try_from(b).ok()))
                    .collect::<Option<Vec<i64>>>()
                    .ok_or_else(|| bad("its strides overflow".into()))?,
            ),
            _ => None,
        };
        let shape = t.shape.clone();
        if span > 0
            && let Some(all) = self.data.as_slice()
            && let Ok(start) = usize::try_from(t.offset)
            && let Some(bytes) = all.get(start..)
            && (bytes.as_ptr() as usize).is_multiple_of(alignment(t.dtype))
        {
            return Ok(Array {
                keep: Keep::Mapped(self.data.clone()),
                ptr: bytes.as_ptr() as usize,
                typestr,
                shape,
                strides,
                readonly: true,
            });
        }
        let data = self.data.clone();
        let (offset, len) = (
            t.offset,
            usize::try_from(span).map_err(|_| bad("too large for memory".into()))?,
        );
        let body = py.detach(|| {
            let mut buf = vec![0u8; len];
            let mut done = 0;
            while done < len {
                let n = data.read_at(offset + done as u64, &mut buf[done..])?;
                if n == 0 {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "cut off"));
                }
                done += n;
            }
            Ok(buf)
        });
        let body = body.map_err(|e| bad(e.to_string()))?;
        Ok(Array::owned(body, typestr, shape, strides))
    }
}

/// The alignment numpy wants of `dtype`'s elements (on x86-64): strings
/// and records need none, complex numbers that of their parts.
fn alignment(dtype: Dtype) -> usize {
    use Dtype::*;
    match dtype {
        Bytes(_) | Void(_) => 1,
        Unicode(_) => 4,
        C64 => 4,
        C128 => 8,
        _ => usize::try_from((dtype.bits() / 8).clamp(1, 16)).unwrap_or(1),
    }
}

/// What keeps an [`Array`]'s bytes alive.
enum Keep {
    /// The source's mapping: the array is a view on it.
    Mapped(#[allow(dead_code)] Data),
    /// A copy of its own.
    Owned(#[allow(dead_code)] Vec<u8>),
}

/// Bytes for numpy, by the array interface: `numpy.asarray(a)` makes an
/// array whose base is this object, which keeps the bytes alive.
#[pyclass(module = "pparse._pparse", frozen)]
struct Array {
    keep: Keep,
    ptr: usize,
    typestr: String,
    shape: Vec<u64>,
    strides: Option<Vec<i64>>,
    readonly: bool,
}

impl Array {
    fn owned(body: Vec<u8>, typestr: String, shape: Vec<u64>, strides: Option<Vec<i64>>) -> Array {
        let ptr = body.as_ptr() as usize;
        Array {
            keep: Keep::Owned(body),
            ptr,
            typestr,
            shape,
            strides,
            readonly: false,
        }
    }
}

#[pymethods]
impl Array {
    /// numpy's array interface (version 3).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("version", 3)?;
        d.set_item("typestr", &self.typestr)?;
        d.set_item("shape", PyTuple::new(py, &self.shape)?)?;
        d.set_item("data", (self.ptr, self.readonly))?;
        match &self.strides {
            Some(s) => d.set_item("strides", PyTuple::new(py, s)?)?,
            None => d.set_item("strides", py.None())?,
        }
        Ok(d)
    }

    /// Whether the array is a view on the mapped file (no copy).
    #[getter]
    fn mapped(&self) -> bool {
        matches!(self.keep, Keep::Mapped(_))
    }
}

/// The extension module.
#[pymodule]
fn _pparse(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(open, m)?)?;
    m.add_function(wrap_pyfunction!(io_stats, m)?)?;
    m.add_function(wrap_pyfunction!(set_threads, m)?)?;
    m.add_function(wrap_pyfunction!(threads, m)?)?;
    m.add_function(wrap_pyfunction!(trace_io_start, m)?)?;
    m.add_function(wrap_pyfunction!(trace_io_stop, m)?)?;
    m.add_class::<Source>()?;
    m.add_class::<File>()?;
    m.add_class::<Tensor>()?;
    m.add_class::<Array>()?;
    m.add_class::<records::Records>()?;
    m.add_class::<records::Damage>()?;
    m.add_class::<PickleOps>()?;
    m.add("Error", py.get_type::<Error>())?;
    m.add("NotFound", py.get_type::<NotFound>())?;
    m.add("NotAContainer", py.get_type::<NotAContainer>())?;
    m.add("NoContent", py.get_type::<NoContent>())?;
    m.add("DamagedError", py.get_type::<DamagedError>())?;
    Ok(())
}
