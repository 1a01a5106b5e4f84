//! Reading `blameprof report --format json --view flat` (schema `blameprof-report`, version 1
//! or 2, docs/report-json.md): each function once, with its inclusive value of every metric.

use std::collections::BTreeMap;

use serde_json::Value;

/// Why a report could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("report is not JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("not a blameprof-report version 1 or 2 document (schema {schema}, version {version})")]
    Schema { schema: String, version: String },
    #[error("report has no `{0}` field of the expected type")]
    Field(&'static str),
}

/// One function of the flat view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatFunction {
    /// Demangled name, as the report shows it.
    pub function: String,
    pub module: String,
    /// Inclusive value per metric (ns).
    pub inclusive: BTreeMap<String, u64>,
}

/// A flat-view report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlatReport {
    /// Every metric of the profile, in the report's order.
    pub metrics: Vec<String>,
    pub totals: BTreeMap<String, u64>,
    pub samples: u64,
    pub functions: Vec<FlatFunction>,
}

/// The last path segment of a (Rust or C++) name: `a::b::<impl c>::f` gives `f`; generic
/// arguments (`<...>`) are skipped when splitting, and a trailing `::h<hash>` is dropped.
pub fn last_segment(name: &str) -> &str {
    let mut depth = 0usize;
    let mut segments = Vec::new();
    let mut start = 0;
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => depth += 1,
            b'>' => depth = depth.saturating_sub(1),
            b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                segments.push(&name[start..i]);
                start = i + 2;
                i += 1;
            }
            _ => {}
        }
        i += 1;
    }
    segments.push(&name[start..]);
    let is_hash = |s: &str| {
        s.len() == 17 && s.starts_with('h') && s[1..].bytes().all(|b| b.is_ascii_hexdigit())
    };
    match segments.as_slice() {
        [.., last, hash] if is_hash(hash) => last,
        [.., last] => last,
        [] => name,
    }
}

/// Whether the report's `reported` name stands for the truth's `wanted` name: equal, or
/// equal in the last path segment.
pub fn names_match(reported: &str, wanted: &str) -> bool {
    reported == wanted || last_segment(reported) == wanted
}

fn u64_map(
    value: Option<&Value>,
    field: &'static str,
) -> Result<BTreeMap<String, u64>, ReportError> {
    let obj = value
        .and_then(Value::as_object)
        .ok_or(ReportError::Field(field))?;
    obj.iter()
        .map(|(k, v)| Ok((k.clone(), v.as_u64().ok_or(ReportError::Field(field))?)))
        .collect()
}

impl FlatReport {
    /// Parses the JSON text of a flat-view report.
    pub fn parse(json: &str) -> Result<Self, ReportError> {
        let doc: Value = serde_json::from_str(json)?;
        let schema = doc.get("schema").and_then(Value::as_str).unwrap_or("?");
        let version = doc.get("version").and_then(Value::as_u64);
        if schema != "blameprof-report" || !matches!(version, Some(1 | 2)) {
            return Err(ReportError::Schema {
                schema: schema.to_string(),
                version: version.map_or("?".to_string(), |v| v.to_string()),
            });
        }
        let metrics = doc
            .get("metrics")
            .and_then(Value::as_array)
            .ok_or(ReportError::Field("metrics"))?
            .iter()
            .map(|m| m.get("name").and_then(Value::as_str).map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .ok_or(ReportError::Field("metrics"))?;
        let totals = u64_map(doc.get("totals"), "totals")?;
        let samples = doc
            .get("samples")
            .and_then(Value::as_u64)
            .ok_or(ReportError::Field("samples"))?;
        let functions = doc
            .get("roots")
            .and_then(Value::as_array)
            .ok_or(ReportError::Field("roots"))?
            .iter()
            .map(|node| {
                let text = |f: &'static str| {
                    node.get(f)
                        .and_then(Value::as_str)
                        .map(str::to_string)
                        .ok_or(ReportError::Field(f))
                };
                Ok(FlatFunction {
                    function: text("function")?,
                    module: text("module")?,
                    inclusive: u64_map(node.get("inclusive"), "inclusive")?,
                })
            })
            .collect::<Result<_, ReportError>>()?;
        Ok(FlatReport {
            metrics,
            totals,
            samples,
            functions,
        })
    }

    /// The inclusive `metric` of the functions that `function` names (summed over modules and
    /// over Rust paths with that last segment); 0 when the metric or the function is absent.
    pub fn inclusive(&self, metric: &str, function: &str) -> u64 {
        self.functions
            .iter()
            .filter(|f| names_match(&f.function, function))
            .map(|f| f.inclusive.get(metric).copied().unwrap_or(0))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_segments() {
        assert_eq!(last_segment("insert"), "insert");
        assert_eq!(last_segment("rust_std::holder::slow_update"), "slow_update");
        assert_eq!(last_segment("a::<b::C as d::E>::f"), "f");
        assert_eq!(
            last_segment("std::rt::lang_start::h0123456789abcdef"),
            "lang_start"
        );
        assert!(names_match("rust_std::Table::insert", "insert"));
        assert!(!names_match("rust_std::insert_all", "insert"));
    }

    #[test]
    fn parses_a_flat_report() {
        let json = r#"{"schema":"blameprof-report","version":1,"view":"flat","metric":"blame",
            "metrics":[{"name":"work","unit":"ns","description":""},{"name":"blame","unit":"ns","description":""}],
            "totals":{"work":10,"blame":7},"samples":3,"lost_samples":0,"processes":[],"threads":[],
            "roots":[
              {"function":"insert","module":"/a","file":null,"line":null,"inlined":false,
               "inclusive":{"work":4,"blame":5},"exclusive":{"work":4,"blame":0},"children":[]},
              {"function":"m::insert","module":"/b","file":null,"line":null,"inlined":false,
               "inclusive":{"work":1,"blame":2},"exclusive":{"work":1,"blame":0},"children":[]}]}"#;
        let r = FlatReport::parse(json).unwrap();
        assert_eq!(r.metrics, ["work", "blame"]);
        assert_eq!(r.samples, 3);
        assert_eq!(r.inclusive("blame", "insert"), 7);
        assert_eq!(r.inclusive("blame.mutex", "insert"), 0);
        assert_eq!(r.inclusive("blame", "lookup"), 0);
        assert!(matches!(
            FlatReport::parse(r#"{"schema":"x","version":1}"#),
            Err(ReportError::Schema { .. })
        ));
    }
}
