//! The callers (bottom-up) view and the flat view, built from an [`Analysis`].
//!
//! Job: in the callers view every function is a root carrying its own inclusive and
//! exclusive cost; the children of a root are its callers, then their callers, and each
//! carries the part of the root function's cost that came through that calling path
//! (HPCToolkit's "callers view"). The flat view is the callers view without the callers.
//!
//! Invariants:
//! - a sample is charged to a function at most once, at the function's innermost
//!   occurrence on the path, so recursion never counts a sample twice in a root;
//! - the caller chain of that occurrence is charged the same values, so a root's inclusive
//!   cost equals the sum of its children's (and likewise for exclusive), unless the function
//!   is itself an outermost frame on some paths;
//! - roots merge inlined and out-of-line occurrences of a function.
//!
//! Not async-signal-safe (allocates); single-threaded.

use super::cct::{Tree, TreeBuilder};
use super::{Analysis, FunctionId};
use std::collections::HashSet;

/// The callers view.
pub fn bottom_up(analysis: &Analysis) -> Tree {
    build(analysis, true)
}

/// The flat view: one root per function, no children.
pub fn flat(analysis: &Analysis) -> Tree {
    build(analysis, false)
}

fn build(analysis: &Analysis, with_callers: bool) -> Tree {
    let mut b = TreeBuilder::new(analysis.metrics.len());
    let mut seen: HashSet<FunctionId> = HashSet::new();
    for path in &analysis.paths {
        seen.clear();
        let leaf = path.locs.len() - 1;
        for (i, loc) in path.locs.iter().enumerate().rev() {
            if !seen.insert(loc.function) {
                continue;
            }
            let exclusive = i == leaf;
            let root = b.child(None, loc, true);
            b.charge(root, loc, &path.values, exclusive);
            if with_callers {
                let mut callee = root;
                for caller in path.locs[..i].iter().rev() {
                    let node = b.child(Some(callee), caller, false);
                    b.charge(node, caller, &path.values, exclusive);
                    callee = node;
                }
            }
        }
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{analysis_of, find_path};

    #[test]
    fn bottom_up_apportions_cost_along_calling_paths() {
        // g is reached from main->f (6, leaf) and main (4, leaf); f has 2 of its own.
        let a = analysis_of(&[
            (&[0x30, 0x20, 0x10], 6),
            (&[0x30, 0x10], 4),
            (&[0x30, 0x20], 2),
        ]);
        let t = bottom_up(&a);
        let g = find_path(&a, &t, &["g"]);
        assert_eq!((t.inclusive(g), t.exclusive(g)), (&[10][..], &[10][..]));
        let g_f = find_path(&a, &t, &["g", "f"]);
        assert_eq!((t.inclusive(g_f), t.exclusive(g_f)), (&[6][..], &[6][..]));
        let g_f_main = find_path(&a, &t, &["g", "f", "main"]);
        assert_eq!(t.inclusive(g_f_main), &[6]);
        let g_main = find_path(&a, &t, &["g", "main"]);
        assert_eq!(
            (t.inclusive(g_main), t.exclusive(g_main)),
            (&[4][..], &[4][..])
        );
        let f = find_path(&a, &t, &["f"]);
        assert_eq!((t.inclusive(f), t.exclusive(f)), (&[8][..], &[2][..]));
        let f_main = find_path(&a, &t, &["f", "main"]);
        assert_eq!(
            (t.inclusive(f_main), t.exclusive(f_main)),
            (&[8][..], &[2][..])
        );
        let main = find_path(&a, &t, &["main"]);
        assert_eq!(
            (t.inclusive(main), t.exclusive(main)),
            (&[12][..], &[0][..])
        );
        assert!(t.children(main).is_empty());
    }

    #[test]
    fn bottom_up_recursion_counts_once_and_shows_recursive_callers() {
        let a = analysis_of(&[(&[0x30, 0x20, 0x20, 0x20], 9)]);
        let t = bottom_up(&a);
        let f = find_path(&a, &t, &["f"]);
        assert_eq!((t.inclusive(f), t.exclusive(f)), (&[9][..], &[9][..]));
        let chain = find_path(&a, &t, &["f", "f", "f", "main"]);
        assert_eq!(t.inclusive(chain), &[9]);
    }

    #[test]
    fn flat_counts_inclusive_once_per_sample() {
        // f recursive: main->f->f->f->g 5, main->f->f 3.
        let a = analysis_of(&[
            (&[0x30, 0x20, 0x20, 0x20, 0x10], 5),
            (&[0x30, 0x20, 0x20], 3),
        ]);
        let t = flat(&a);
        assert_eq!(t.roots().len(), 3);
        let f = find_path(&a, &t, &["f"]);
        assert_eq!((t.inclusive(f), t.exclusive(f)), (&[8][..], &[3][..]));
        let g = find_path(&a, &t, &["g"]);
        assert_eq!((t.inclusive(g), t.exclusive(g)), (&[5][..], &[5][..]));
        let main = find_path(&a, &t, &["main"]);
        assert_eq!((t.inclusive(main), t.exclusive(main)), (&[8][..], &[0][..]));
        assert!(t.roots().iter().all(|&r| t.children(r).is_empty()));
    }
}
