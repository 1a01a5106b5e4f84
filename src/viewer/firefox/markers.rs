//! The Firefox export's markers: a wait (an idleness sample's interval, naming the holders
//! blamed for it) and a release that took blame, with their schemas for the profiler.
//!
//! Invariants: a wait is blamed only on other threads' releases of its lock that ended
//! during it. Not async-signal-safe (allocates).

use fxprof_processed_profile::{
    CategoryHandle, MarkerFieldFlags, MarkerFieldFormat, MarkerLocations, Profile as FxProfile,
    StaticSchemaMarker, StaticSchemaMarkerField, StringHandle,
};

/// A release of a lock (a blame sample), for the waits it overlapped.
pub(super) struct Release {
    /// When the hold began (its end when its length is unknown) and ended, monotonic ns.
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) tid: u32,
    /// "reader-1 in read_index".
    pub(super) holder: String,
}

/// Who a wait of thread `tid` from `start` to `end` (monotonic ns) is blamed on: the other
/// threads' releases of its lock (`releases`, by end) that ended during it, with their
/// overlap with it, largest first.
pub(super) fn blamed_on(releases: Option<&Vec<Release>>, tid: u32, start: u64, end: u64) -> String {
    let Some(releases) = releases else {
        return "no release of this lock recorded".to_owned();
    };
    let first = releases.partition_point(|r| r.end < start);
    let mut holders: Vec<(&str, u64)> = Vec::new();
    for r in releases[first..].iter().take_while(|r| r.end <= end) {
        if r.tid == tid {
            continue;
        }
        let overlap = r.end.saturating_sub(r.start.max(start));
        match holders.iter_mut().find(|(h, _)| *h == r.holder) {
            Some((_, sum)) => *sum += overlap,
            None => holders.push((&r.holder, overlap)),
        }
    }
    if holders.is_empty() {
        return "no release of this lock recorded during the wait".to_owned();
    }
    holders.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    holders
        .iter()
        .map(|(holder, ns)| match ns {
            0 => holder.to_string(),
            ns => format!(
                "{holder} ({})",
                crate::viewer::units::format_value(*ns, "ns")
            ),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A wait of a thread: the interval of an idleness sample.
pub(super) struct WaitMarker {
    pub(super) name: StringHandle,
    pub(super) category: CategoryHandle,
    pub(super) kind: StringHandle,
    pub(super) lock: StringHandle,
    pub(super) idleness_ms: f64,
    pub(super) blamed_on: StringHandle,
}

impl StaticSchemaMarker for WaitMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "BlameprofWait";
    const DESCRIPTION: Option<&'static str> =
        Some("A thread waited for a lock or an event (blameprof's idleness, at the waiter)");
    const LOCATIONS: MarkerLocations = MarkerLocations::MARKER_CHART
        .union(MarkerLocations::MARKER_TABLE)
        .union(MarkerLocations::TIMELINE_OVERVIEW);
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.lock}");
    const TOOLTIP_LABEL: Option<&'static str> =
        Some("{marker.name} on {marker.data.lock}: {marker.data.idleness}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.data.lock}: {marker.data.idleness}, blamed on {marker.data.blamedOn}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        field("kind", "Primitive", MarkerFieldFormat::String),
        field("lock", "Lock", MarkerFieldFormat::String),
        field("idleness", "Idleness", MarkerFieldFormat::Duration),
        field("blamedOn", "Blamed on", MarkerFieldFormat::String),
    ];

    fn name(&self, _profile: &mut FxProfile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut FxProfile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.kind,
            1 => self.lock,
            _ => self.blamed_on,
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        self.idleness_ms
    }
}

/// A release that took blame: the hold (or the instant) of a blame sample.
pub(super) struct BlameMarker {
    pub(super) name: StringHandle,
    pub(super) category: CategoryHandle,
    pub(super) kind: StringHandle,
    pub(super) lock: StringHandle,
    pub(super) blame_ms: f64,
    pub(super) hold_ms: f64,
    pub(super) site: StringHandle,
}

impl StaticSchemaMarker for BlameMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "BlameprofBlame";
    const DESCRIPTION: Option<&'static str> = Some(
        "A thread released a lock (or signalled an event) others waited for: the waiting it \
         caused is its blame",
    );
    const LOCATIONS: MarkerLocations = MarkerLocations::MARKER_CHART
        .union(MarkerLocations::MARKER_TABLE)
        .union(MarkerLocations::TIMELINE_OVERVIEW);
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.site}");
    const TOOLTIP_LABEL: Option<&'static str> = Some(
        "{marker.name}: {marker.data.site} released {marker.data.lock}, blame {marker.data.blame}",
    );
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.data.site} released {marker.data.lock}: blame {marker.data.blame}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        field("kind", "Primitive", MarkerFieldFormat::String),
        field("lock", "Lock", MarkerFieldFormat::String),
        field("blame", "Blame", MarkerFieldFormat::Duration),
        field("hold", "Hold", MarkerFieldFormat::Duration),
        field("site", "Released in", MarkerFieldFormat::String),
    ];

    fn name(&self, _profile: &mut FxProfile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut FxProfile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.kind,
            1 => self.lock,
            _ => self.site,
        }
    }

    fn number_field_value(&self, field_index: u32) -> f64 {
        match field_index {
            2 => self.blame_ms,
            _ => self.hold_ms,
        }
    }
}

pub(super) const fn field(
    key: &'static str,
    label: &'static str,
    format: MarkerFieldFormat,
) -> StaticSchemaMarkerField {
    StaticSchemaMarkerField {
        key,
        label,
        format,
        flags: MarkerFieldFlags::SEARCHABLE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(start: u64, end: u64, tid: u32, holder: &str) -> Release {
        Release {
            start,
            end,
            tid,
            holder: holder.to_owned(),
        }
    }

    #[test]
    fn a_wait_is_blamed_on_the_releases_that_ended_during_it() {
        let releases = vec![
            release(0, 10, 2, "before in a"),
            release(15, 20, 3, "reader in read"),
            release(20, 60, 4, "rebuilder in rebuild"),
            release(60, 60, 1, "itself in own"),
            release(70, 90, 3, "later in read"),
        ];
        let blamed = blamed_on(Some(&releases), 1, 12, 65);
        assert_eq!(
            blamed,
            "rebuilder in rebuild (40 ns), reader in read (5 ns)"
        );
        assert_eq!(
            blamed_on(Some(&releases), 1, 61, 65),
            "no release of this lock recorded during the wait"
        );
        assert_eq!(blamed_on(None, 1, 0, 5), "no release of this lock recorded");
    }
}
