//! Locks that lost their init site: a program with more locks alive at once than the
//! runtime's init-site table holds. A test binary of its own: its 400,000-lock run
//! disturbed the timing-sensitive tests of `locks.rs` when it ran beside them.

mod common;

use common::*;

/// More locks alive at once (100,000) than the runtime's init-site table holds (65,536
/// slots): the lock view says how many lost their init site, and the init site's group
/// together with them accounts for every mutex the program made, never more.
#[test]
fn locks_that_lost_their_init_site_are_counted_and_said() {
    let prog = compile_c("many_locks.c", "many_locks", &["-O2", "-g", "-pthread"]);
    let dir = scratch_dir("many-locks-sites").join("prof");
    let run = profile_ok(&dir, 200, &prog, &["400000", "100000", "destroy"]);
    let json = report_ok(&dir, &["--view", "locks", "--format", "json"]);
    let text = report_ok(&dir, &["--view", "locks"]).stdout;
    let t = truth(&run.stdout);
    let mutexes = t["locks"] / 2;
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let displaced = v["init_sites_displaced"].as_u64().unwrap();
    let grouped = group_instances(&v, "main -> pthread_mutex_init");
    assert!(
        displaced > 0 && grouped <= mutexes && grouped + displaced >= mutexes,
        "{grouped} mutexes grouped at their init site and {displaced} inits displaced, \
         {mutexes} made"
    );
    assert!(
        text.replace(',', "")
            .contains(&format!("{displaced} lock inits lost their init site")),
        "the lock view does not say so:\n{text}"
    );
}
