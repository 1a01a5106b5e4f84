//! Cost trees, and the calling-context tree (top-down view) built from an [`Analysis`].
//!
//! Job: a [`Tree`] holds nodes keyed, under their parent, by (function, inlined); each node
//! has inclusive and exclusive cost per merged metric and the cost of each source line it
//! was seen at, from which its hottest line is taken. [`top_down`] inserts every weighted
//! path root first: the roots are the outermost frames (`_start`, `start_thread`, ...), threads and
//! processes merge wherever their paths read the same.
//!
//! Invariants:
//! - a node's inclusive cost is the sum of the paths through it; since a path visits a tree
//!   node at most once, recursion never counts a sample twice;
//! - exclusive <= inclusive, and a node's inclusive >= the sum of its children's;
//! - a node's line costs add up to its inclusive cost.
//!
//! Layout: trees can have millions of nodes (callers views of deep, varied stacks), so
//! nodes hold no allocations of their own: children and extra lines live in shared arrays
//! indexed by node (compressed rows), and a node's first line is stored inline.
//!
//! Not async-signal-safe (allocates); single-threaded.

use super::{Analysis, FunctionId, Loc, Names, SourceLine};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

/// Index of a node in a [`Tree`].
pub type NodeId = u32;

const NO_PARENT: NodeId = NodeId::MAX;

/// One node: a function (or inlined function) in a context.
#[derive(Debug, Clone)]
pub struct Node {
    pub function: FunctionId,
    /// Inlined into its parent (top-down), resp. at every occurrence (callers-view roots).
    pub inlined: bool,
    parent: NodeId,
    /// The first line the node was charged at; its costs are the node's row of `line_costs`.
    first_line: SourceLine,
}

/// Which cost orders a tree's children.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Inclusive,
    Exclusive,
}

/// A tree (or forest) of nodes with costs per merged metric.
#[derive(Debug, Clone)]
pub struct Tree {
    nodes: Vec<Node>,
    roots: Vec<NodeId>,
    metric_count: usize,
    /// Per node: `metric_count` inclusive values, then `metric_count` exclusive values.
    costs: Vec<u64>,
    /// Per node: `metric_count` values of its first line.
    line_costs: Vec<u64>,
    /// Children of node `i`: `children[child_rows[i]..child_rows[i + 1]]`.
    child_rows: Vec<u32>,
    children: Vec<NodeId>,
    /// Lines after the first of node `i`: `extra_lines[extra_rows[i]..extra_rows[i + 1]]`,
    /// as (line, row of `extra_costs`), in the order first seen.
    extra_rows: Vec<u32>,
    extra_lines: Vec<(SourceLine, usize)>,
    /// Per extra line: `metric_count` values.
    extra_costs: Vec<u64>,
}

impl Tree {
    /// A tree without nodes.
    pub fn empty(metric_count: usize) -> Tree {
        TreeBuilder::new(metric_count).finish()
    }

    pub fn roots(&self) -> &[NodeId] {
        &self.roots
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// The children of `id`, in creation order until [`Tree::sort`] orders them.
    pub fn children(&self, id: NodeId) -> &[NodeId] {
        &self.children[row(&self.child_rows, id)]
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Inclusive cost per merged metric.
    pub fn inclusive(&self, id: NodeId) -> &[u64] {
        let at = id as usize * 2 * self.metric_count;
        &self.costs[at..at + self.metric_count]
    }

    /// Exclusive cost per merged metric.
    pub fn exclusive(&self, id: NodeId) -> &[u64] {
        let at = (id as usize * 2 + 1) * self.metric_count;
        &self.costs[at..at + self.metric_count]
    }

    /// The cost of `id` by `by` in `metric`.
    pub fn cost(&self, id: NodeId, metric: usize, by: SortBy) -> u64 {
        match by {
            SortBy::Inclusive => self.inclusive(id)[metric],
            SortBy::Exclusive => self.exclusive(id)[metric],
        }
    }

    /// The line where most of the node's inclusive `metric` cost was (ties: the first seen);
    /// `None` when no line is known.
    pub fn hottest_line(&self, id: NodeId, metric: usize) -> Option<SourceLine> {
        let m = self.metric_count;
        let first = (
            self.node(id).first_line,
            self.line_costs[id as usize * m + metric],
        );
        let extra = self.extra_lines[row(&self.extra_rows, id)]
            .iter()
            .map(|&(line, r)| (line, self.extra_costs[r * m + metric]));
        let mut best: Option<(SourceLine, u64)> = None;
        for (line, v) in std::iter::once(first).chain(extra) {
            if best.map_or(true, |(_, b)| v > b) {
                best = Some((line, v));
            }
        }
        best.map(|(line, _)| line)
            .filter(|l| l.file.is_some() || l.line.is_some())
    }

    /// Orders roots and every child list by decreasing cost, then by function name.
    pub fn sort(&mut self, names: &Names, metric: usize, by: SortBy) {
        let mut roots = std::mem::take(&mut self.roots);
        let mut children = std::mem::take(&mut self.children);
        let tree = &*self;
        let other = match by {
            SortBy::Inclusive => SortBy::Exclusive,
            SortBy::Exclusive => SortBy::Inclusive,
        };
        let order = |a: &NodeId, b: &NodeId| {
            let (na, nb) = (tree.node(*a), tree.node(*b));
            tree.cost(*b, metric, by)
                .cmp(&tree.cost(*a, metric, by))
                .then_with(|| {
                    tree.cost(*b, metric, other)
                        .cmp(&tree.cost(*a, metric, other))
                })
                .then_with(|| {
                    let name = |f| names.function(f).name.as_str();
                    name(na.function).cmp(name(nb.function))
                })
                .then(na.inlined.cmp(&nb.inlined))
        };
        roots.sort_by(order);
        for id in 0..tree.nodes.len() as NodeId {
            children[row(&tree.child_rows, id)].sort_by(order);
        }
        self.roots = roots;
        self.children = children;
    }

    /// Marks the hot path of a sorted tree: from the heaviest root while it holds at least
    /// half of `total`, then down the heaviest child while it holds at least half of its
    /// parent (inclusive `metric`). Returns one flag per node.
    pub fn hot_path(&self, metric: usize, total: u64) -> Vec<bool> {
        let mut hot = vec![false; self.nodes.len()];
        let mut parent_cost = total;
        let mut candidates = self.roots();
        while let Some(&first) = candidates.first() {
            let cost = self.inclusive(first)[metric];
            if cost == 0 || cost * 2 < parent_cost {
                break;
            }
            hot[first as usize] = true;
            parent_cost = cost;
            candidates = self.children(first);
        }
        hot
    }
}

/// The range of compressed row `id`.
fn row(rows: &[u32], id: NodeId) -> Range<usize> {
    rows[id as usize] as usize..rows[id as usize + 1] as usize
}

/// Multiply-rotate hashing (as in rustc's FxHash) for the builder's small integer keys;
/// the keys come from our own interning, so hash flooding is not a concern.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }

    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Builds a [`Tree`] path by path.
pub(crate) struct TreeBuilder {
    tree: Tree,
    /// (parent or [`NO_PARENT`], function, inlined) -> node.
    index: FxMap<(NodeId, FunctionId, bool), NodeId>,
    /// (node, line other than its first) -> row of `extra_costs`.
    extra: FxMap<(NodeId, SourceLine), usize>,
}

impl TreeBuilder {
    pub(crate) fn new(metric_count: usize) -> TreeBuilder {
        TreeBuilder {
            tree: Tree {
                nodes: Vec::new(),
                roots: Vec::new(),
                metric_count,
                costs: Vec::new(),
                line_costs: Vec::new(),
                child_rows: Vec::new(),
                children: Vec::new(),
                extra_rows: Vec::new(),
                extra_lines: Vec::new(),
                extra_costs: Vec::new(),
            },
            index: FxMap::default(),
            extra: FxMap::default(),
        }
    }

    /// The node for `loc` under `parent` (`None`: a root), created if new. With
    /// `merge_inlined`, inlined and out-of-line occurrences share one node, which is marked
    /// inlined only while every occurrence is.
    pub(crate) fn child(
        &mut self,
        parent: Option<NodeId>,
        loc: &Loc,
        merge_inlined: bool,
    ) -> NodeId {
        let parent = parent.unwrap_or(NO_PARENT);
        let key = (parent, loc.function, loc.inlined && !merge_inlined);
        if let Some(&id) = self.index.get(&key) {
            self.tree.nodes[id as usize].inlined &= loc.inlined;
            return id;
        }
        let t = &mut self.tree;
        let id = t.nodes.len() as NodeId;
        t.nodes.push(Node {
            function: loc.function,
            inlined: loc.inlined,
            parent,
            first_line: loc.line,
        });
        t.costs.resize(t.costs.len() + 2 * t.metric_count, 0);
        t.line_costs.resize(t.line_costs.len() + t.metric_count, 0);
        if parent == NO_PARENT {
            t.roots.push(id);
        }
        self.index.insert(key, id);
        id
    }

    /// Charges `values` to `node` at `loc`'s line: inclusive always, exclusive if asked.
    pub(crate) fn charge(&mut self, node: NodeId, loc: &Loc, values: &[u64], exclusive: bool) {
        let t = &mut self.tree;
        let m = t.metric_count;
        let at = node as usize * 2 * m;
        add(&mut t.costs[at..at + m], values);
        if exclusive {
            add(&mut t.costs[at + m..at + 2 * m], values);
        }
        let costs = if t.nodes[node as usize].first_line == loc.line {
            &mut t.line_costs[node as usize * m..(node as usize + 1) * m]
        } else {
            let extra_costs = &mut t.extra_costs;
            let r = *self.extra.entry((node, loc.line)).or_insert_with(|| {
                extra_costs.resize(extra_costs.len() + m, 0);
                extra_costs.len() / m - 1
            });
            &mut t.extra_costs[r * m..(r + 1) * m]
        };
        add(costs, values);
    }

    /// Lays out children and extra lines in compressed rows.
    pub(crate) fn finish(self) -> Tree {
        let mut t = self.tree;
        let n = t.nodes.len();
        let parents = t.nodes.iter().map(|node| node.parent);
        let (child_rows, children) =
            compress(n, parents.enumerate().map(|(i, p)| (p, i as NodeId)));
        t.child_rows = child_rows;
        t.children = children;
        let mut extra: Vec<((NodeId, SourceLine), usize)> = self.extra.into_iter().collect();
        extra.sort_by_key(|&((node, _), r)| (node, r));
        let (extra_rows, extra_lines) = compress(
            n,
            extra.into_iter().map(|((node, line), r)| (node, (line, r))),
        );
        t.extra_rows = extra_rows;
        t.extra_lines = extra_lines;
        t
    }
}

/// Groups `(owner, item)` pairs into rows by owner (`0..n`; other owners are dropped),
/// keeping the items' order within a row. Returns (row starts, items).
fn compress<T: Copy + Default>(
    n: usize,
    pairs: impl Iterator<Item = (NodeId, T)> + Clone,
) -> (Vec<u32>, Vec<T>) {
    let mut rows = vec![0u32; n + 1];
    for (owner, _) in pairs.clone().filter(|&(o, _)| (o as usize) < n) {
        rows[owner as usize + 1] += 1;
    }
    for i in 0..n {
        rows[i + 1] += rows[i];
    }
    let mut items = vec![T::default(); rows[n] as usize];
    let mut next = rows.clone();
    for (owner, item) in pairs.filter(|&(o, _)| (o as usize) < n) {
        items[next[owner as usize] as usize] = item;
        next[owner as usize] += 1;
    }
    (rows, items)
}

fn add(sums: &mut [u64], values: &[u64]) {
    for (s, v) in sums.iter_mut().zip(values) {
        *s += v;
    }
}

/// The calling-context tree: every path inserted root first, charged inclusively to each
/// node on it and exclusively to its leaf.
pub fn top_down(analysis: &Analysis) -> Tree {
    let mut b = TreeBuilder::new(analysis.metrics.len());
    for path in &analysis.paths {
        let mut parent = None;
        let last = path.locs.len() - 1;
        for (i, loc) in path.locs.iter().enumerate() {
            let node = b.child(parent, loc, false);
            b.charge(node, loc, &path.values, i == last);
            parent = Some(node);
        }
    }
    b.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attribution::testutil::{analysis_of, find_path, fname};

    #[test]
    fn inclusive_and_exclusive_with_recursion() {
        // main -> f -> f -> g (leaf) 10; main -> f (leaf) 5; main -> g 1.
        let a = analysis_of(&[
            (&[0x30, 0x20, 0x20, 0x10], 10),
            (&[0x30, 0x20], 5),
            (&[0x30, 0x10], 1),
        ]);
        let t = top_down(&a);
        let main = find_path(&a, &t, &["main"]);
        assert_eq!(t.inclusive(main), &[16]);
        assert_eq!(t.exclusive(main), &[0]);
        let f = find_path(&a, &t, &["main", "f"]);
        assert_eq!(t.inclusive(f), &[15]);
        assert_eq!(t.exclusive(f), &[5]);
        let ff = find_path(&a, &t, &["main", "f", "f"]);
        assert_eq!(t.inclusive(ff), &[10]);
        assert_eq!(t.exclusive(ff), &[0]);
        let g = find_path(&a, &t, &["main", "f", "f", "g"]);
        assert_eq!((t.inclusive(g), t.exclusive(g)), (&[10][..], &[10][..]));
        assert_eq!(t.roots().len(), 1);
        assert_eq!(fname(&a, &t, t.roots()[0]), "main");
    }

    #[test]
    fn sorted_children_and_hot_path() {
        let a = analysis_of(&[(&[0x30, 0x20, 0x10], 7), (&[0x30, 0x10], 3)]);
        let mut t = top_down(&a);
        t.sort(&a.names, 0, SortBy::Inclusive);
        let main = t.roots()[0];
        let kids: Vec<&str> = t.children(main).iter().map(|&c| fname(&a, &t, c)).collect();
        assert_eq!(kids, ["f", "g"]);
        let hot = t.hot_path(0, a.totals[0]);
        assert!(hot[main as usize]);
        let f = find_path(&a, &t, &["main", "f"]);
        assert!(hot[f as usize]);
        let g_under_main = find_path(&a, &t, &["main", "g"]);
        assert!(!hot[g_under_main as usize]);
    }
}
