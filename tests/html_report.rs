//! `report --format html` in a real browser: headless Chromium opens the page from disk,
//! performs user actions through the page's self-test (`#selftest=<steps>`: clicks on the
//! expand toggles, the tabs, the column headings and the flame graph's frames, typing into
//! the search box) and dumps what the page then shows, which is compared with
//! `report --format json` of the same profile.
//!
//! Proves that on the profile of a contended workload (`lock_table.c`, four threads on one
//! global mutex, an array of mutexes and a heap mutex) (1) the page loads without a JS error
//! and opens on the hot path of the JSON report; (2) a node clicked open shows the node's
//! children of the JSON report with their inclusive and exclusive work, idleness and blame,
//! in the units the page shows, within their rounding; (3) the search finds every node of a
//! function of the workload, each shown (its path expanded) and highlighted; (4) the flat
//! view and a bottom-up node's callers are those of the JSON report, sorted by the column
//! clicked; (5) the lock table shows the workload's locks with the lock view's waiting and
//! blame, and who waited behind whom; the threads table every thread with its totals;
//! (6) a flame graph frame tells its name and inclusive value when hovered and fills the
//! graph when clicked; (7) percentages of effort are of work + idleness; and that
//! (8) C++ names with `<`, `>` (`shapes.cc`) appear as text, exactly as the JSON spells them.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use blameprof::viewer::units::format_value;
use common::*;
use serde_json::{json, Value};

/// Limit for one headless Chromium run.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

/// The distribution's Chromium, which the test drives.
fn chromium() -> PathBuf {
    ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "chromium is missing (Debian package chromium): run \
                 scripts/install-system-packages.sh"
            )
        })
}

/// `blameprof report PROFILE --format html -o DIR/report.html`: the page's path.
fn html_report(profile: &Path) -> PathBuf {
    let page = profile.with_file_name("report.html");
    let args: [&OsStr; 6] = [
        "report".as_ref(),
        profile.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        page.as_os_str(),
    ];
    let run = blameprof_cmd(&args);
    assert!(
        run.status.success(),
        "report --format html: {}",
        run.describe()
    );
    page
}

/// `s` with every byte but unreserved ones percent-encoded (`keep`: also kept).
fn percent_encode(s: &str, keep: &[u8]) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b if keep.contains(&b) => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// Text content of the element that begins with `open` in serialized HTML, unescaped.
fn element_text(dom: &str, open: &str) -> Option<String> {
    let start = dom.find(open)? + open.len();
    let end = start + dom[start..].find("</pre>")?;
    Some(
        dom[start..end]
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&nbsp;", "\u{a0}")
            .replace("&amp;", "&"),
    )
}

/// Opens `page` in headless Chromium with the self-test `steps`; returns the results, one
/// per step, after checking that every step ran and no JS error occurred.
fn browse(page: &Path, steps: &Value) -> Vec<Value> {
    let url = format!(
        "file://{}#selftest={}",
        percent_encode(&page.display().to_string(), b"/"),
        percent_encode(&steps.to_string(), b"")
    );
    let profile_dir = page.with_file_name("chromium-profile");
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--window-size=1280,900",
        "--virtual-time-budget=30000",
    ])
    .arg(format!("--user-data-dir={}", profile_dir.display()))
    .arg("--dump-dom")
    .arg(&url);
    let run = run_with_timeout(&mut cmd, BROWSER_TIMEOUT);
    assert!(run.status.success(), "chromium failed: {}", run.describe());
    let text = element_text(&run.stdout, "<pre id=\"selftest\">").unwrap_or_else(|| {
        panic!(
            "the page wrote no self-test result (its script did not run to the end):\n{}",
            run.describe()
        )
    });
    let out: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("self-test result is not JSON ({e}): {text}"));
    assert_eq!(out["done"], true, "self-test did not finish: {out}");
    assert_eq!(out["errors"], json!([]), "JS errors on the page: {out}");
    let results = out["steps"].as_array().expect("steps").clone();
    assert_eq!(results.len(), steps.as_array().map_or(0, Vec::len));
    for (step, result) in steps.as_array().into_iter().flatten().zip(&results) {
        assert!(
            result.get("error").is_none(),
            "step {step} failed: {result}"
        );
    }
    results
}

/// Whether a value the page shows ("1.23 ms", "0 ns", "12 events") is `value` in the unit
/// `unit`, within the rounding of its last digit (the page formats as
/// [`format_value`] does).
fn shows(text: &str, value: u64, unit: &str) -> bool {
    let expected = format_value(value, unit);
    let Some((number, scale)) = text.split_once(' ') else {
        return false;
    };
    let (_, want_scale) = expected.split_once(' ').unwrap_or(("", ""));
    let factor = match scale {
        "s" => 1e9,
        "ms" => 1e6,
        "us" => 1e3,
        _ => 1.0,
    };
    let Ok(shown) = number.parse::<f64>() else {
        return false;
    };
    let decimals = number.split_once('.').map_or(0, |(_, d)| d.len());
    let half_unit = 0.5 * 10f64.powi(-(decimals as i32)) * factor;
    scale == want_scale && (shown * factor - value as f64).abs() <= half_unit * (1.0 + 1e-9)
}

/// Whether a percentage the page shows ("12.3%") is `part` of `whole`, within rounding.
fn shows_percent(text: &str, part: u64, whole: u64) -> bool {
    let Some(Ok(shown)) = text.strip_suffix('%').map(str::parse::<f64>) else {
        return false;
    };
    let want = if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    };
    (shown - want).abs() <= 0.05 + 1e-9
}

/// The cell `column` ("work/incl") of a row the page showed: (value, percentage).
fn cell<'a>(row: &'a Value, column: &str) -> (&'a str, &'a str) {
    let c = &row["cells"][column];
    match (c[0].as_str(), c[1].as_str()) {
        (Some(v), Some(p)) => (v, p),
        _ => panic!("no cell {column} in {row}"),
    }
}

/// The columns (metric, inclusive or exclusive) the tree views show by default: every
/// metric the runtime records.
const COLUMNS: [(&str, &str); 8] = [
    ("work", "inclusive"),
    ("work", "exclusive"),
    ("idleness", "inclusive"),
    ("idleness", "exclusive"),
    ("blame", "inclusive"),
    ("blame", "exclusive"),
    ("held.contended", "inclusive"),
    ("held.contended", "exclusive"),
];

/// Whether a row the page showed is the JSON node `node`: its name and every default
/// column, value and percentage of the metric's total; else what differs.
fn row_is(row: &Value, node: &Value, report: &Value) -> Result<(), String> {
    if row["name"] != node["function"] || row["inlined"] != node["inlined"] {
        return Err(format!("row {row}\nis not node {node}"));
    }
    for (metric, field) in COLUMNS {
        let column = format!("{metric}/{}", &field[..4]);
        let (value, pct) = cell(row, &column);
        let want = metric_of(node, field, metric);
        let total = total_of(report, metric);
        if !shows(value, want, "ns") || !shows_percent(pct, want, total) {
            return Err(format!(
                "{} {column}: the page shows {value} {pct}, the JSON report {want} ns of {total}",
                func(node)
            ));
        }
    }
    Ok(())
}

fn assert_row_is(row: &Value, node: &Value, report: &Value) {
    if let Err(e) = row_is(row, node, report) {
        panic!("{e}");
    }
}

/// The node reached from the roots of a JSON tree view by the function names `path`.
fn node_at<'a>(report: &'a Value, path: &[String]) -> &'a Value {
    let mut nodes = roots(report);
    let mut found = None;
    for name in path {
        let node = nodes
            .iter()
            .find(|n| func(n) == name)
            .unwrap_or_else(|| panic!("no node {name} on {path:?}"));
        nodes = node["children"].as_array().expect("children");
        found = Some(node);
    }
    found.expect("a path")
}

/// The page's rows of step `result` (`rows`, `children` or `matches`).
fn rows_of<'a>(result: &'a Value, field: &str) -> &'a Vec<Value> {
    result[field]
        .as_array()
        .unwrap_or_else(|| panic!("no {field} in {result}"))
}

/// Matches each row the page showed with a distinct JSON node of the same name whose values
/// it shows (rows of one name may come in either order when their sort values tie).
fn assert_rows_are(rows: &[Value], nodes: &[Value], report: &Value) {
    assert_eq!(
        rows.len(),
        nodes.len(),
        "the page shows {} rows, the JSON report has {} nodes: {:?} vs {:?}",
        rows.len(),
        nodes.len(),
        rows.iter().map(|r| &r["name"]).collect::<Vec<_>>(),
        nodes.iter().map(func).collect::<Vec<_>>()
    );
    let mut left: Vec<&Value> = nodes.iter().collect();
    for row in rows {
        match left.iter().position(|n| row_is(row, n, report).is_ok()) {
            Some(i) => {
                left.remove(i);
            }
            None => match left.iter().find(|n| n["function"] == row["name"]) {
                Some(n) => assert_row_is(row, n, report),
                None => panic!("the page shows {row}, which the JSON report lacks"),
            },
        }
    }
}

/// The lock `name` of the lock view's JSON.
fn lock_json<'a>(locks: &'a Value, name: &str) -> &'a Value {
    locks["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .find(|l| l["name"] == name)
        .unwrap_or_else(|| panic!("no lock {name} in the lock view"))
}

#[test]
fn the_page_shows_what_the_json_report_says_and_acts_on_clicks_and_typing() {
    let prog = compile_c(
        "lock_table.c",
        "html-lock-table",
        &["-O2", "-g", "-pthread"],
    );
    let profile = scratch_dir("html-report").join("prof");
    profile_ok(&profile, 200, &prog, &["100000"]);
    let top = report_json(&profile, &[]);
    let flat = report_json(&profile, &["--view", "flat"]);
    let callers = report_json_metric(&profile, "blame", &["--view", "bottom-up"]);
    let locks_run = report_ok(&profile, &["--view", "locks", "--format", "json"]);
    let locks: Value = serde_json::from_str(&locks_run.stdout).expect("locks JSON");
    let page = html_report(&profile);

    // The node to click open: the heaviest `lookup`, by the path to it.
    let mut lookups = find_paths(&top, &["lookup"]);
    lookups.sort_by_key(|p| std::cmp::Reverse(p.inclusive));
    let lookup_path = lookups
        .first()
        .unwrap_or_else(|| panic!("no lookup in\n{}", describe_paths(&top, "spin", 5)))
        .names
        .clone();
    // The callers to click open in the bottom-up view: those of the unlock that took the
    // most blame.
    let unlock = roots(&callers)
        .iter()
        .filter(|r| func(r) == "pthread_mutex_unlock")
        .max_by_key(|r| metric_of(r, "inclusive", "blame"))
        .expect("pthread_mutex_unlock among the bottom-up roots");
    let steps = json!([
        {"do": "rows", "count": 500},
        {"do": "button", "id": "collapse"},
        {"do": "expand", "path": lookup_path},
        {"do": "search", "text": "cache_touch"},
        {"do": "tab", "tab": "flat"},
        {"do": "rows", "count": 12},
        {"do": "tab", "tab": "bottom-up"},
        {"do": "expand", "path": ["pthread_mutex_unlock"]},
        {"do": "sort", "col": "blame/incl"},
        {"do": "rows", "count": 8},
        {"do": "table", "tab": "locks", "table": "lock-table", "open": 0},
        {"do": "table", "tab": "threads", "table": "thread-table"},
        {"do": "flame", "metric": "work", "frame": "lookup"},
        {"do": "percent", "of": "effort"},
        {"do": "tab", "tab": "top-down"},
        {"do": "rows", "count": 3},
    ]);
    let r = browse(&page, &steps);

    // (1) It opens on the hot path.
    let hot: Vec<&str> = rows_of(&r[0], "rows")
        .iter()
        .filter(|row| row["hot"] == true)
        .map(|row| row["name"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(hot, heaviest_path(&top), "the page's hot path");

    // (2) A click shows the node's children.
    assert_eq!(
        r[2]["clicked"],
        json!(vec![true; lookup_path.len()]),
        "every node on the path was collapsed and clicked open: {}",
        r[2]
    );
    let node = node_at(&top, &lookup_path);
    assert_row_is(&r[2]["node"], node, &top);
    assert_eq!(r[2]["node"]["expanded"], true, "{}", r[2]["node"]);
    let children = node["children"].as_array().expect("children");
    assert!(!children.is_empty(), "lookup has callees: {node}");
    assert_rows_are(rows_of(&r[2], "children"), children, &top);

    // (3) The search finds every node of cache_touch and shows it.
    let mut cache_touch = 0;
    for_each_node(&top, &mut |n| {
        cache_touch += usize::from(func(n).to_lowercase().contains("cache_touch"))
    });
    assert!(cache_touch > 0, "cache_touch in the JSON report");
    let found = rows_of(&r[3], "matches");
    assert_eq!(found.len(), cache_touch, "matching rows shown: {}", r[3]);
    assert!(
        found
            .iter()
            .all(|m| m["name"] == "cache_touch" && m["match"] == true),
        "{}",
        r[3]
    );
    assert!(
        r[3]["status"]
            .as_str()
            .is_some_and(|s| s.starts_with(&format!("{cache_touch} nodes match"))),
        "{}",
        r[3]
    );

    // (4) The flat view, and the callers of the unlock, sorted by the clicked column.
    let shown = rows_of(&r[5], "rows");
    let want: Vec<Value> = roots(&flat).iter().take(shown.len()).cloned().collect();
    assert!(shown.len() == 12.min(roots(&flat).len()), "{}", r[5]);
    for (row, node) in shown.iter().zip(&want) {
        assert_row_is(row, node, &flat);
    }
    assert_row_is(&r[7]["node"], unlock, &callers);
    assert_rows_are(
        rows_of(&r[7], "children"),
        unlock["children"].as_array().expect("children"),
        &callers,
    );
    assert_eq!(r[8]["sorted"], "blame/incl");
    let blames: Vec<u64> = rows_of(&r[9], "rows")
        .iter()
        .filter(|row| row["depth"] == 0)
        .map(|row| {
            let (v, _) = cell(row, "blame/incl");
            let node = roots(&callers)
                .iter()
                .find(|n| {
                    n["function"] == row["name"]
                        && shows(v, metric_of(n, "inclusive", "blame"), "ns")
                })
                .unwrap_or_else(|| panic!("no bottom-up root like {row}"));
            metric_of(node, "inclusive", "blame")
        })
        .collect();
    assert!(blames.len() >= 2, "{}", r[9]);
    assert!(
        blames.windows(2).all(|w| w[0] >= w[1]),
        "sorted by inclusive blame: {blames:?}"
    );
    let most = roots(&callers)
        .iter()
        .map(|n| metric_of(n, "inclusive", "blame"))
        .max()
        .unwrap_or(0);
    assert_eq!(blames[0], most, "the first root has the most blame");

    // (5) The lock table and the threads.
    let heads = r[10]["heads"].as_array().expect("heads");
    let column = |name: &str| {
        heads
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name} in {heads:?}"))
    };
    let rows = r[10]["rows"].as_array().expect("lock rows");
    for name in ["table_lock", "cache_new -> pthread_mutex_init"] {
        let want = lock_json(&locks, name);
        let row = rows
            .iter()
            .find(|row| row[0] == name)
            .unwrap_or_else(|| panic!("no lock {name} in the page's table: {rows:?}"));
        for (head, field) in [("wait", "wait_ns"), ("blame", "blame_ns")] {
            let shown = row[column(head)].as_str().unwrap_or("");
            let value = want["counts"][field].as_u64().expect(field);
            assert!(
                shows(shown, value, "ns"),
                "{name} {head}: page {shown}, JSON {value}"
            );
        }
        assert_eq!(row[column("kind")], "mutex");
        assert_eq!(
            row[column("contended")],
            want["counts"]["contended"].to_string()
        );
    }
    assert_eq!(rows[0][0], locks["locks"][0]["name"], "sorted by blame");
    let pairs = r[10]["details"]
        .as_array()
        .expect("details of the first lock");
    let first = &locks["locks"][0];
    let pair = &first["pairs"][0];
    let waited = format!(
        "{} waited {} behind {}",
        pair["waiter"].as_str().expect("waiter"),
        format_value(pair["ns"].as_u64().expect("ns"), "ns"),
        pair["holder"].as_str().expect("holder")
    );
    assert!(
        pairs
            .iter()
            .any(|p| p.as_str().is_some_and(|p| p.starts_with(&waited))),
        "who waited behind whom: {waited:?} in {pairs:?}"
    );
    let threads = r[11]["rows"].as_array().expect("thread rows");
    let json_threads = top["threads"].as_array().expect("threads");
    assert_eq!(threads.len(), json_threads.len());
    for t in json_threads {
        let row = threads
            .iter()
            .find(|row| row[1].as_str().and_then(|s| s.parse().ok()) == t["tid"].as_u64())
            .unwrap_or_else(|| panic!("no thread {} in {threads:?}", t["tid"]));
        let work = row[4].as_str().unwrap_or("");
        let value = metric_of(t, "totals", "work");
        let shown = work.split("  ").next().unwrap_or("");
        assert!(
            shows(shown, value, "ns"),
            "thread {}: page {work}, JSON {value}",
            t["tid"]
        );
    }

    // (6) The flame graph: hover and zoom.
    let flame = &r[12];
    let widest = find_paths(&top, &["lookup"])
        .iter()
        .map(|p| p.inclusive)
        .max()
        .unwrap_or(0);
    let tip: Vec<&str> = flame["tip"].as_str().unwrap_or("").lines().collect();
    assert_eq!(tip.first(), Some(&"lookup"), "{flame}");
    let value = tip.get(1).and_then(|l| l.split(" (").next()).unwrap_or("");
    assert!(
        shows(value, widest, "ns"),
        "tooltip {tip:?}, JSON {widest} ns"
    );
    let (before, after, width) = (
        flame["before"].as_f64().unwrap_or(0.0),
        flame["after"].as_f64().unwrap_or(0.0),
        flame["box"].as_f64().unwrap_or(0.0),
    );
    assert!(
        before < after && after >= width - 3.0,
        "a click zooms the frame to the graph's width: {flame}"
    );

    // (7) Percentages of effort.
    let effort = total_of(&top, "work") + total_of(&top, "idleness");
    let first = &rows_of(&r[15], "rows")[0];
    let root = node_at(&top, &[first["name"].as_str().unwrap_or("").to_owned()]);
    let (_, pct) = cell(first, "work/incl");
    assert!(
        shows_percent(pct, metric_of(root, "inclusive", "work"), effort),
        "{pct} of effort {effort}: {first}"
    );
}

#[test]
fn cxx_names_are_shown_as_the_json_report_spells_them() {
    let prog = compile_c(
        "shapes.cc",
        "html-shapes",
        &["-O1", "-g", "-pthread", "-lstdc++"],
    );
    let profile = scratch_dir("html-cxx").join("prof");
    profile_ok(&profile, 1000, &prog, &["0.3"]);
    let flat = report_json(&profile, &["--view", "flat"]);
    let templated: Vec<&str> = roots(&flat)
        .iter()
        .map(func)
        .filter(|f| f.contains('<') && f.contains('>'))
        .collect();
    let accumulator = "geom::Accumulator<double>::add_all(int)";
    assert!(
        templated.contains(&accumulator),
        "the JSON report names {accumulator}: {templated:?}"
    );
    let page = html_report(&profile);
    let steps = json!([
        {"do": "tab", "tab": "flat"},
        {"do": "search", "text": "<"},
    ]);
    let r = browse(&page, &steps);
    let shown: Vec<&str> = rows_of(&r[1], "matches")
        .iter()
        .map(|m| m["name"].as_str().unwrap_or(""))
        .collect();
    let mut want = templated.clone();
    want.sort_unstable();
    let mut got = shown.clone();
    got.sort_unstable();
    assert_eq!(got, want, "every function whose name has '<', as text");
}
