//! Log records as plain JSON, and the metrics of a run's history.
//!
//! A record's protobuf fields become JSON by name (int64 as strings, enums
//! by name, defaults left out: the proto3 JSON mapping that wandb's own
//! tools print). W&B stores logged values as JSON text in `value_json`
//! items; those lists become objects of decoded values, so `history.item`
//! reads `{"loss": 0.25, "acc": 0.9}` rather than a list of key/JSON pairs.

use serde_json::Value;

use super::record::Record;

/// The `data` of a record in `pparse records --json`: the message of its
/// type, with its key/value items made into objects.
pub fn data(rec: &Record<'_>) -> Value {
    match &rec.msg {
        Ok(()) => serde_json::from_str(&rec.data).unwrap_or(Value::Null),
        Err(e) => Value::String(format!("does not decode: {e}")),
    }
}

/// The whole record (number, control, info and body), for `--verbose`.
pub fn full(rec: &Record<'_>) -> Value {
    let mut out = String::new();
    match rec.full_json(&mut out) {
        Ok(()) => serde_json::from_str(&out).unwrap_or(Value::Null),
        Err(e) => Value::String(format!("does not decode: {e}")),
    }
}

/// A number a metric can be plotted with: JSON numbers, and the non-finite
/// values W&B writes as `NaN`/`Infinity`.
pub fn metric_value(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        _ => None,
    }
}

/// The step of a history record's `data` (see [`data`]): `step.num` (an
/// int64, a string in JSON; a `step` without `num` is step 0). Records of
/// the legacy Python writer have no `step`: then the `_step` item, and
/// failing that `index`, the record's place among the history records.
pub fn history_step(data: &Value, index: u64) -> f64 {
    if let Some(step) = data.get("step") {
        return match step.get("num") {
            Some(Value::String(s)) => s.trim().parse::<i64>().map_or(0.0, |n| n as f64),
            Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
            _ => 0.0,
        };
    }
    data.get("item")
        .and_then(|items| items.get("_step"))
        .and_then(metric_value)
        .filter(|s| s.is_finite())
        .unwrap_or(index as f64)
}

/// The plottable items of a history record's `data`: (name, value) for
/// each item [`metric_value`] reads.
pub fn history_metrics(data: &Value) -> impl Iterator<Item = (&str, f64)> {
    data.get("item")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.as_str(), metric_value(v)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_is_a_metric() {
        assert!(metric_value(&Value::String("NaN".into())).unwrap().is_nan());
    }

    #[test]
    fn history_steps() {
        let go = serde_json::json!({"item": {"_step": 7, "loss": 0.5}, "step": {"num": "7"}});
        assert_eq!(history_step(&go, 3), 7.0);
        // Step 0: proto3 JSON leaves the default out.
        let zero = serde_json::json!({"item": {"_step": 0}, "step": {}});
        assert_eq!(history_step(&zero, 3), 0.0);
        let legacy = serde_json::json!({"item": {"_step": 5, "loss": "NaN", "text": "x"}});
        assert_eq!(history_step(&legacy, 3), 5.0);
        let bare = serde_json::json!({"item": {"loss": 1}});
        assert_eq!(history_step(&bare, 3), 3.0);
        let m: Vec<(&str, f64)> = history_metrics(&legacy).collect();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0], ("_step", 5.0));
        assert!(m[1].1.is_nan());
    }
}
