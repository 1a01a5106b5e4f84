//! Threads' roles past a shared start routine: the load-imbalance rules' stages.
//!
//! Job: threads started through one wrapper (RocksDB's `StartThreadWrapper`, a pool's
//! generic worker loop, `std::thread`'s closure shim) may do different work: a fill stage
//! and a read stage share the wrapper and nothing else. A thread's role is the path of call
//! sites, from its outermost frame in, through which at least [`ROLE_SHARE`] of its work
//! passed ([`role_path`]): a wrapper passes all of it on, work that branches stops it. Two
//! threads have one role when one's path is a prefix of the other's (the same code, one
//! thread's work spread a little wider); threads of different roles part at a call site,
//! whose function names their stage ([`group_roles`]).
//!
//! Invariants: a thread without [`ROLE_SAMPLES`] work samples does not split a routine
//! (nothing to tell its role by: it joins the routine's largest role); one
//! role per routine leaves the stage named by its routine, as before roles. Pure; not
//! async-signal-safe (allocates).

use crate::format::Frame;

/// The share of a thread's work a call site must carry for its role to reach past it.
pub const ROLE_SHARE: f64 = 0.8;

/// The work samples a thread needs for its role path to split its routine's threads: one.
/// A thread too light to tell joins the routine's largest role, and a whole stage of light
/// threads (db_bench's readers, 3 to 9 samples each on a busy machine) joined the heavy one
/// beside it, read as one stage of 8 with "imbalance" between its halves.
pub const ROLE_SAMPLES: usize = 1;

/// A thread's role: root-first, the call sites through which at least [`ROLE_SHARE`] of
/// its work (`samples`: each a leaf-first path and its value) passed; `None` with fewer
/// than [`ROLE_SAMPLES`] samples.
pub fn role_path(samples: &[(&[Frame], u64)]) -> Option<Vec<Frame>> {
    if samples.len() < ROLE_SAMPLES {
        return None;
    }
    let total: u64 = samples.iter().map(|s| s.1).sum();
    let mut path: Vec<Frame> = Vec::new();
    let mut along: Vec<&(&[Frame], u64)> = samples.iter().collect();
    loop {
        let depth = path.len();
        let at = |stack: &[Frame]| stack.len().checked_sub(depth + 1).map(|i| stack[i]);
        let mut by_frame: Vec<(Frame, u64)> = Vec::new();
        for (stack, value) in &along {
            let Some(frame) = at(stack) else { continue };
            match by_frame.iter_mut().find(|(f, _)| *f == frame) {
                Some((_, sum)) => *sum += value,
                None => by_frame.push((frame, *value)),
            }
        }
        let Some(&(frame, carried)) = by_frame.iter().max_by_key(|(_, v)| *v) else {
            break;
        };
        if (carried as f64) < ROLE_SHARE * total as f64 {
            break;
        }
        path.push(frame);
        along.retain(|(stack, _)| at(stack) == Some(frame));
    }
    Some(path)
}

/// Whether `a` is a prefix of `b` or `b` of `a` (the same role, one spread wider).
fn prefix_related(a: &[Frame], b: &[Frame]) -> bool {
    let shorter = a.len().min(b.len());
    a[..shorter] == b[..shorter]
}

/// Per path, whether it is ambiguous: a prefix of two paths that part from each other (a
/// thread whose work spread over two roles' code, as a reader with three samples, one of
/// them in shared code): it would join both roles into one.
fn ambiguous(paths: &[Option<Vec<Frame>>]) -> Vec<bool> {
    let under = |i: usize| -> Vec<&[Frame]> {
        let Some(p) = &paths[i] else {
            return Vec::new();
        };
        paths
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .filter_map(|(_, q)| q.as_deref())
            .filter(|q| q.len() > p.len() && q[..p.len()] == p[..])
            .collect()
    };
    (0..paths.len())
        .map(|i| {
            let longer = under(i);
            longer
                .iter()
                .enumerate()
                .any(|(j, a)| longer[j + 1..].iter().any(|b| !prefix_related(a, b)))
        })
        .collect()
}

/// The threads of one start routine grouped by role: per thread (as `paths`, each a
/// [`role_path`]) its group, and per group the call site that tells it from the others
/// (its first frame no other group's common path shares, and the frame beneath: [`Label`];
/// `None` when there is one group).
/// A thread whose path is ambiguous ([`ambiguous`]) joins no group (`None`): it stays in its
/// routine's stage.
pub fn group_roles(paths: &[Option<Vec<Frame>>]) -> (Vec<Option<usize>>, Vec<Option<Label>>) {
    let ambiguous = ambiguous(paths);
    let paths: Vec<Option<Vec<Frame>>> = paths
        .iter()
        .zip(&ambiguous)
        .map(|(p, &a)| p.clone().filter(|_| !a))
        .collect();
    let n = paths.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for a in 0..n {
        for b in a + 1..n {
            let (Some(pa), Some(pb)) = (&paths[a], &paths[b]) else {
                continue;
            };
            if prefix_related(pa, pb) {
                let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                parent[ra.max(rb)] = ra.min(rb);
            }
        }
    }
    // Groups in order of their first thread; each group's common path is its shortest
    // member (in a group joined by prefixes, the shortest path is a prefix of all).
    let mut roots: Vec<usize> = Vec::new();
    let mut common: Vec<&[Frame]> = Vec::new();
    let mut sizes: Vec<usize> = Vec::new();
    let mut group: Vec<Option<usize>> = vec![None; n];
    for i in 0..n {
        let Some(path) = &paths[i] else { continue };
        let r = root(&mut parent, i);
        let g = match roots.iter().position(|&x| x == r) {
            Some(g) => g,
            None => {
                roots.push(r);
                common.push(path);
                sizes.push(0);
                roots.len() - 1
            }
        };
        if path.len() < common[g].len() {
            common[g] = path;
        }
        sizes[g] += 1;
        group[i] = Some(g);
    }
    if roots.len() <= 1 {
        return (vec![Some(0); n], vec![None]);
    }
    // Threads too light to tell join the largest role (the first of equals).
    let largest = (0..sizes.len())
        .max_by_key(|&g| (sizes[g], std::cmp::Reverse(g)))
        .unwrap_or(0);
    let of_thread = group
        .into_iter()
        .zip(&ambiguous)
        .map(|(g, &a)| match a {
            true => None,
            false => Some(g.unwrap_or(largest)),
        })
        .collect();
    let shared = |a: &[Frame], b: &[Frame]| a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let labels = (0..common.len())
        .map(|g| {
            let depth = (0..common.len())
                .filter(|&o| o != g)
                .map(|o| shared(common[g], common[o]))
                .max()
                .unwrap_or(0);
            let call = *common[g].get(depth)?;
            Some(Label {
                call,
                callee: common[g].get(depth + 1).copied(),
            })
        })
        .collect();
    (of_thread, labels)
}

/// What tells a role apart: the call site where its common path parts from the other
/// roles', and the frame beneath it on that path, in the function called there, if the path
/// reaches into it. Roles whose call sites lie in one function (`stage` calling
/// `slow_stage` on one thread and `fast_stage` on another) are told apart by their callees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Label {
    pub call: Frame,
    pub callee: Option<Frame>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(offset: u64) -> Frame {
        Frame { module: 1, offset }
    }

    fn label(call: u64, callee: u64) -> Option<Label> {
        Some(Label {
            call: f(call),
            callee: Some(f(callee)),
        })
    }

    /// `count` samples of value 1 of the leaf-first path of `root_first` offsets.
    fn samples(root_first: &[u64], count: usize) -> Vec<Vec<Frame>> {
        let stack: Vec<Frame> = root_first.iter().rev().map(|&o| f(o)).collect();
        vec![stack; count]
    }

    fn path_of(stacks: &[Vec<Frame>]) -> Option<Vec<Frame>> {
        let s: Vec<(&[Frame], u64)> = stacks.iter().map(|s| (s.as_slice(), 1)).collect();
        role_path(&s)
    }

    #[test]
    fn a_role_reaches_past_wrappers_and_stops_where_the_work_branches() {
        // start -> wrapper -> body -> fill, whose work is 60% in one leaf, 40% in another.
        let mut stacks = samples(&[1, 2, 3, 10, 100], 30);
        stacks.extend(samples(&[1, 2, 3, 10, 200], 20));
        assert_eq!(path_of(&stacks), Some(vec![f(1), f(2), f(3), f(10)]));
        // 85% under one leaf: the role reaches it.
        let mut stacks = samples(&[1, 2, 3, 10, 100], 85);
        stacks.extend(samples(&[1, 2, 3, 10, 200], 15));
        assert_eq!(
            path_of(&stacks),
            Some(vec![f(1), f(2), f(3), f(10), f(100)])
        );
        // Too few samples to tell.
        assert_eq!(path_of(&samples(&[1, 2, 3], ROLE_SAMPLES - 1)), None);
    }

    #[test]
    fn threads_of_one_wrapper_doing_different_work_are_different_roles() {
        let fill = path_of(&samples(&[1, 2, 3, 10, 11], 40));
        let read = path_of(&samples(&[1, 2, 3, 20, 21], 40));
        // One more fill thread, its work spread wider: the same role.
        let mut wide = samples(&[1, 2, 3, 10, 11], 25);
        wide.extend(samples(&[1, 2, 3, 10, 12], 25));
        let wide = path_of(&wide);
        let (of, labels) = group_roles(&[fill.clone(), read, wide, None]);
        assert_eq!(
            of,
            [Some(0), Some(1), Some(0), Some(0)],
            "the light thread joins the largest role"
        );
        // The fill role's common path is the wide thread's, which stops at 10.
        let fill_label = Some(Label {
            call: f(10),
            callee: None,
        });
        assert_eq!(labels, [fill_label, label(20, 21)]);
        // Threads doing the same work: one role, named by the routine.
        let (of, labels) = group_roles(&[fill.clone(), fill, None]);
        assert_eq!((of, labels), (vec![Some(0); 3], vec![None]));
        // Only threads too light to tell: one role.
        assert_eq!(group_roles(&[None, None]), (vec![Some(0); 2], vec![None]));
    }

    #[test]
    fn a_thread_whose_role_is_a_prefix_of_two_roles_joins_neither() {
        // db_bench: four fillers, four readers, one reader's few samples stop its role at
        // the wrapper, which both roles pass through. It must not make them one role.
        let fill = path_of(&samples(&[1, 2, 3, 10, 11], 40));
        let read = path_of(&samples(&[1, 2, 3, 20, 21], 10));
        let short = path_of(&samples(&[1, 2, 3], 3));
        let (of, labels) = group_roles(&[fill.clone(), fill, read.clone(), short.clone(), read]);
        assert_eq!(of, [Some(0), Some(0), Some(1), None, Some(1)]);
        assert_eq!(labels, [label(10, 11), label(20, 21)]);
        // A prefix of one role only is that role.
        let fill = path_of(&samples(&[1, 2, 3, 10, 11], 40));
        let (of, _) = group_roles(&[fill.clone(), short, fill]);
        assert_eq!(of, [Some(0); 3]);
    }
}
