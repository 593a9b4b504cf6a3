//! `Source.records()`: the records of a W&B log, read, decoded and parsed
//! from JSON by a thread, handed to Python in batches as dicts.
//!
//! The library gives each record's `data` as JSON text (what `records
//! --json` prints); it is parsed straight into Python objects, with the
//! keys it repeats made once ([`PySeed`]), and the dicts list keys as the
//! text has them, as `json.loads` would.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, sync_channel};

use pparse::data::Data;
use pparse::offer::{LogEntry, RecordsOffer};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyList, PyString};
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// Builds the Python objects of a JSON text as it is parsed (what
/// `json.loads` makes, keys in their order), with the object keys it has
/// seen shared: a log's records repeat the same few hundred keys.
#[derive(Clone, Copy)]
struct PySeed<'a, 'py> {
    py: Python<'py>,
    keys: &'a RefCell<HashMap<String, Py<PyString>>>,
}

/// Keys kept at most; then the cache starts again.
const MAX_KEYS: usize = 4096;

impl<'py> PySeed<'_, 'py> {
    fn key(&self, k: &str) -> Bound<'py, PyString> {
        let mut keys = self.keys.borrow_mut();
        if let Some(s) = keys.get(k) {
            return s.bind(self.py).clone();
        }
        if keys.len() >= MAX_KEYS {
            keys.clear();
        }
        let s = PyString::new(self.py, k);
        keys.insert(k.to_owned(), s.clone().unbind());
        s
    }
}

fn py_err<E: de::Error>(e: PyErr) -> E {
    E::custom(e)
}

impl<'de, 'py> DeserializeSeed<'de> for PySeed<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A map key, shared through the cache.
struct KeySeed<'a, 'py>(PySeed<'a, 'py>);

impl<'de, 'py> DeserializeSeed<'de> for KeySeed<'_, 'py> {
    type Value = Bound<'py, PyString>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, 'py> Visitor<'de> for KeySeed<'_, 'py> {
    type Value = Bound<'py, PyString>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E>(self, k: &str) -> Result<Self::Value, E> {
        Ok(self.0.key(k))
    }
}

impl<'de, 'py> Visitor<'de> for PySeed<'_, 'py> {
    type Value = Bound<'py, PyAny>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(self.py.None().into_bound(self.py))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(PyBool::new(self.py, v).to_owned().into_any())
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        let Ok(i) = v.into_pyobject(self.py);
        Ok(i.into_any())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        let Ok(i) = v.into_pyobject(self.py);
        Ok(i.into_any())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(PyFloat::new(self.py, v).into_any())
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(PyString::new(self.py, v).into_any())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let l = PyList::empty(self.py);
        while let Some(v) = seq.next_element_seed(self)? {
            l.append(v).map_err(py_err)?;
        }
        Ok(l.into_any())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let d = PyDict::new(self.py);
        // A repeated key keeps its last value, as json.loads does.
        while let Some(k) = map.next_key_seed(KeySeed(self))? {
            let v = map.next_value_seed(self)?;
            d.set_item(k, v).map_err(py_err)?;
        }
        Ok(d.into_any())
    }
}

/// The objects of `text`; text that is not JSON (none of pparse's own
/// making) stays a string.
fn loads<'py>(seed: PySeed<'_, 'py>, text: &str) -> Bound<'py, PyAny> {
    let mut de = serde_json::Deserializer::from_str(text);
    match seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v)) {
        Ok(v) => v,
        Err(_) => PyString::new(seed.py, text).into_any(),
    }
}

/// The records of a log, in batches, as a thread reads them.
#[pyclass(module = "pparse._pparse", frozen)]
pub(crate) struct Records {
    rx: Mutex<Option<Receiver<Vec<LogEntry>>>>,
}

impl Records {
    /// Starts the thread reading the log in `data`: records of `types`
    /// (all when empty), then `outer`, the damage the log's containers
    /// report over its bytes.
    pub(crate) fn start(
        offer: RecordsOffer,
        data: Data,
        types: Vec<String>,
        outer: Vec<LogEntry>,
    ) -> Records {
        // A few batches wait at most: memory stays bounded while Python
        // takes its time, and dropping the iterator ends the thread.
        let (tx, rx) = sync_channel(2);
        std::thread::spawn(move || {
            let mut open = true;
            (offer.each)(&*data, &types, &mut |batch| {
                open = tx.send(batch).is_ok();
                open
            });
            if open && !outer.is_empty() {
                let _ = tx.send(outer);
            }
        });
        Records {
            rx: Mutex::new(Some(rx)),
        }
    }
}

#[pymethods]
impl Records {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch, in file order: a list of dicts (`number`, `type`,
    /// `offset`, `data`) and `Damage` objects.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let batch = py.detach(|| {
            let g = self.rx.lock().unwrap_or_else(|e| e.into_inner());
            g.as_ref().and_then(|rx| rx.recv().ok())
        });
        let Some(batch) = batch else {
            self.close();
            return Ok(None);
        };
        let names = [
            pyo3::intern!(py, "number"),
            pyo3::intern!(py, "type"),
            pyo3::intern!(py, "offset"),
            pyo3::intern!(py, "data"),
        ];
        let keys = RefCell::new(HashMap::new());
        let seed = PySeed { py, keys: &keys };
        // The cyclic collector would scan the young dicts over and over
        // while a batch is built; none of them can be part of a cycle.
        let gc = py.import(pyo3::intern!(py, "gc"))?;
        let was_on = gc
            .call_method0(pyo3::intern!(py, "isenabled"))?
            .is_truthy()?;
        if was_on {
            gc.call_method0(pyo3::intern!(py, "disable"))?;
        }
        let list = PyList::empty(py);
        let built = (|| -> PyResult<()> {
            for e in batch {
                match e {
                    LogEntry::Record {
                        number,
                        kind,
                        offset,
                        data,
                    } => {
                        let d = PyDict::new(py);
                        d.set_item(names[0], number)?;
                        d.set_item(names[1], seed.key(&kind))?;
                        d.set_item(names[2], offset)?;
                        d.set_item(names[3], loads(seed, &data))?;
                        list.append(d)?;
                    }
                    LogEntry::Damage {
                        status,
                        range,
                        reason,
                    } => list.append(Damage {
                        offset: range.start,
                        end: range.end,
                        status: status.as_str(),
                        reason,
                    })?,
                }
            }
            Ok(())
        })();
        if was_on {
            gc.call_method0(pyo3::intern!(py, "enable"))?;
        }
        built?;
        Ok(Some(list))
    }

    /// Stops reading: the thread ends at its next batch.
    fn close(&self) {
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Bytes of a log that hold no record that can be vouched for.
#[pyclass(module = "pparse._pparse", frozen, get_all)]
pub(crate) struct Damage {
    /// Where the span starts, in the log's bytes.
    offset: u64,
    /// Where it ends.
    end: u64,
    /// `truncated` or `corrupt`.
    status: &'static str,
    /// Why.
    reason: String,
}

#[pymethods]
impl Damage {
    fn __repr__(&self) -> String {
        format!(
            "Damage(offset={}, end={}, status={:?}, reason={:?})",
            self.offset, self.end, self.status, self.reason
        )
    }
}
