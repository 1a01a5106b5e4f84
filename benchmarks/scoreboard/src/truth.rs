//! Parsing of a workload's ground truth: the `truth ...` lines it prints on stdout, anywhere
//! among its other output (contract: `benchmarks/README.md`, "Workload contract").

/// One measured value: `truth <metric> <function> <ns>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthValue {
    /// A report metric, `blame.<kind>` or `idleness.<kind>`.
    pub metric: String,
    /// The function the value belongs to, as the report names it (Rust: last path segment).
    pub function: String,
    /// Nanoseconds.
    pub ns: u64,
}

/// What the workload says must rank first by blame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Culprit {
    /// `truth culprit <function>`.
    Function(String),
    /// `truth culprit none`: no ranking check.
    None,
}

/// Everything one run of a workload printed about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Truth {
    pub values: Vec<TruthValue>,
    /// `None` when the workload printed no `truth culprit` line.
    pub culprit: Option<Culprit>,
    /// `truth candidates f1,f2,...`, in the order given.
    pub candidates: Vec<String>,
    /// `truth ops <n>`.
    pub ops: Option<u64>,
    /// Lines that start with `truth` but follow none of the forms above.
    pub malformed: Vec<String>,
}

impl Truth {
    /// Whether the output had no truth line at all (malformed ones count as truth lines).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
            && self.culprit.is_none()
            && self.candidates.is_empty()
            && self.ops.is_none()
            && self.malformed.is_empty()
    }
}

const KINDS: [&str; 8] = [
    "spin",
    "mutex",
    "rwlock",
    "condvar",
    "semaphore",
    "barrier",
    "join",
    "futex",
];

/// Whether `metric` is `blame.<kind>` or `idleness.<kind>` with a known kind.
pub fn is_truth_metric(metric: &str) -> bool {
    match metric.split_once('.') {
        Some(("blame" | "idleness", kind)) => KINDS.contains(&kind),
        _ => false,
    }
}

/// Parses every `truth` line of a workload's stdout; other lines are ignored.
pub fn parse(stdout: &str) -> Truth {
    let mut truth = Truth::default();
    for line in stdout.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first() != Some(&"truth") {
            continue;
        }
        if !parse_fields(&fields[1..], &mut truth) {
            truth.malformed.push(line.trim().to_string());
        }
    }
    truth
}

/// Adds one line's fields (after `truth`) to `truth`; false if they follow no known form.
fn parse_fields(fields: &[&str], truth: &mut Truth) -> bool {
    match fields {
        ["culprit", "none"] => truth.culprit = Some(Culprit::None),
        ["culprit", function] => truth.culprit = Some(Culprit::Function(function.to_string())),
        ["candidates", list] => {
            truth.candidates = list
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            return !truth.candidates.is_empty();
        }
        ["ops", n] => match n.parse() {
            Ok(n) => truth.ops = Some(n),
            Err(_) => return false,
        },
        [metric, function, ns] if is_truth_metric(metric) => match ns.parse() {
            Ok(ns) => truth.values.push(TruthValue {
                metric: metric.to_string(),
                function: function.to_string(),
                ns,
            }),
            Err(_) => return false,
        },
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_among_other_output() {
        let out = "holder: 32 holds\n\
                   truth blame.mutex insert 754400000\n\
                   something else\n\
                   truth idleness.spin lookup 12\n\
                   truth culprit insert\n\
                   truth candidates insert,lookup\n\
                   truth ops 6054\n";
        let t = parse(out);
        assert_eq!(t.values.len(), 2);
        assert_eq!(
            t.values[0],
            TruthValue {
                metric: "blame.mutex".into(),
                function: "insert".into(),
                ns: 754400000
            }
        );
        assert_eq!(t.culprit, Some(Culprit::Function("insert".into())));
        assert_eq!(t.candidates, ["insert", "lookup"]);
        assert_eq!(t.ops, Some(6054));
        assert!(t.malformed.is_empty());
    }

    #[test]
    fn culprit_none_and_malformed_lines() {
        let t = parse("truth culprit none\ntruth blame_insert_ns=5\ntruth blame.bogus f 1\n");
        assert_eq!(t.culprit, Some(Culprit::None));
        assert_eq!(t.malformed.len(), 2);
        assert!(!t.is_empty());
        assert!(parse("no truth here\n").is_empty());
    }
}
