//! Human-readable values: nanoseconds as s/ms/us/ns, percentages.
//!
//! Invariants: pure functions of their inputs; a zero total gives 0 %. Not
//! async-signal-safe (allocates).

/// `value` in `unit`, scaled for reading: nanoseconds become "1.23 s", "45.60 ms",
/// "7.00 us" or "12 ns"; other units are printed as integers followed by the unit.
pub fn format_value(value: u64, unit: &str) -> String {
    if unit != "ns" {
        return match unit {
            "" => value.to_string(),
            _ => format!("{value} {unit}"),
        };
    }
    let v = value as f64;
    match value {
        1_000_000_000.. => format!("{:.2} s", v / 1e9),
        1_000_000.. => format!("{:.2} ms", v / 1e6),
        1_000.. => format!("{:.2} us", v / 1e3),
        _ => format!("{value} ns"),
    }
}

/// `value` as a percentage of `total` (0 when `total` is 0).
pub fn percent(value: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        value as f64 * 100.0 / total as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_nanoseconds() {
        assert_eq!(format_value(0, "ns"), "0 ns");
        assert_eq!(format_value(999, "ns"), "999 ns");
        assert_eq!(format_value(7_000, "ns"), "7.00 us");
        assert_eq!(format_value(45_600_000, "ns"), "45.60 ms");
        assert_eq!(format_value(1_234_000_000, "ns"), "1.23 s");
        assert_eq!(format_value(12, "samples"), "12 samples");
        assert_eq!(percent(1, 4), 25.0);
        assert_eq!(percent(1, 0), 0.0);
    }
}
