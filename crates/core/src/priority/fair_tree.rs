//! The association tree and Fair Tree ranking (src/plugins/priority/multifactor/fair_tree.c).
//!
//! Why here: with slurmdbd, the priority plugin (not assoc_mgr) computes every association's
//! `fs_factor` each PriorityCalcPeriod; gputopo replaces multifactor, so it must produce the
//! same ranks. Without slurmdbd the same ranking runs over the tree built from gputopo's
//! ledger ([`super::ledger`]). The tree is an arena of plain nodes; `children` are Slurm's
//! `usage->children_list` (the associations whose `fs_assoc_ptr` is this node), in list order.

use super::FS_USE_PARENT;
use std::cmp::Ordering;

/// Index of a node in an [`AssocTree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AssocId(pub usize);

/// One association with its inputs (first group) and what the algorithms compute.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct AssocNode {
    /// True for a user association (`assoc->user != NULL`).
    pub is_user: bool,
    /// `shares_raw` (`FairShare=`; [`FS_USE_PARENT`] for `parent`).
    pub shares_raw: u32,
    /// `usage->usage_raw` (decayed billing-seconds).
    pub usage_raw: f64,
    /// `usage->fs_assoc_ptr` (the first ancestor without `FairShare=parent`); `None` for root.
    pub fs_parent: Option<AssocId>,
    /// `usage->children_list`: nodes whose `fs_parent` is this one, in Slurm's order.
    pub children: Vec<AssocId>,
    /// `usage->level_shares`: sum of the siblings' shares (computed by [`AssocTree::normalise_shares`]
    /// or read from Slurm).
    pub level_shares: u32,
    /// `usage->shares_norm`.
    pub shares_norm: f64,
    /// `usage->usage_norm` (output).
    pub usage_norm: f64,
    /// `usage->usage_efctv` (output).
    pub usage_efctv: f64,
    /// `usage->level_fs` (Fair Tree output).
    pub level_fs: f64,
    /// `usage->fs_factor` (Fair Tree output; classic fills it too, see [`super::classic`]).
    pub fs_factor: f64,
}

/// An association tree rooted at node 0 (`assoc_mgr_root_assoc`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct AssocTree {
    /// Nodes; index 0 is the root.
    pub nodes: Vec<AssocNode>,
}

const NO_VAL_F: f64 = 0xffff_fffe_u32 as f64;

impl AssocTree {
    /// A tree with only the root (`FairShare=1`).
    pub fn new() -> Self {
        AssocTree {
            nodes: vec![AssocNode {
                shares_raw: 1,
                shares_norm: 1.0,
                ..Default::default()
            }],
        }
    }

    /// The root.
    pub fn root(&self) -> AssocId {
        AssocId(0)
    }

    /// Adds a node under `parent` (which becomes its `fs_parent` unless `parent` itself uses
    /// its parent's shares) and returns its id.
    pub fn add(
        &mut self,
        parent: AssocId,
        is_user: bool,
        shares_raw: u32,
        usage_raw: f64,
    ) -> AssocId {
        let mut fs_parent = parent;
        while self.nodes[fs_parent.0].shares_raw == FS_USE_PARENT {
            match self.nodes[fs_parent.0].fs_parent {
                Some(p) => fs_parent = p,
                None => break,
            }
        }
        let id = AssocId(self.nodes.len());
        self.nodes.push(AssocNode {
            is_user,
            shares_raw,
            usage_raw,
            fs_parent: Some(fs_parent),
            ..Default::default()
        });
        self.nodes[fs_parent.0].children.push(id);
        id
    }

    /// Adds a node read from Slurm: `fs_parent` is the association whose `children_list` holds
    /// it (its `fs_assoc_ptr`), so no `FairShare=parent` resolution happens here.
    pub fn add_child_of(&mut self, fs_parent: AssocId, mut node: AssocNode) -> AssocId {
        let id = AssocId(self.nodes.len());
        node.fs_parent = Some(fs_parent);
        node.children.clear();
        self.nodes.push(node);
        self.nodes[fs_parent.0].children.push(id);
        id
    }

    /// Adds `usage` to a node and every ancestor up to the root, as `_apply_new_usage` does.
    pub fn add_usage_upwards(&mut self, mut id: AssocId, usage: f64) {
        loop {
            self.nodes[id.0].usage_raw += usage;
            match self.nodes[id.0].fs_parent {
                Some(p) => id = p,
                None => break,
            }
        }
    }

    /// Number of user associations (`g_user_assoc_count`).
    pub fn user_count(&self) -> u32 {
        self.nodes.iter().filter(|n| n.is_user).count() as u32
    }

    /// `_set_children_level_shares` + `assoc_mgr_normalize_assoc_shares` (Fair Tree or
    /// traditional variant), for trees not read from Slurm.
    pub fn normalise_shares(&mut self, fair_tree: bool) {
        for i in 0..self.nodes.len() {
            let sum = self.children_level_shares(AssocId(i));
            for c in self.nodes[i].children.clone() {
                self.nodes[c.0].level_shares = sum;
            }
        }
        for i in 1..self.nodes.len() {
            let norm = if fair_tree {
                self.shares_norm_fair_tree(AssocId(i))
            } else {
                self.shares_norm_traditional(AssocId(i))
            };
            self.nodes[i].shares_norm = norm;
        }
    }

    fn children_level_shares(&self, id: AssocId) -> u32 {
        self.nodes[id.0].children.iter().fold(0u32, |sum, c| {
            let child = &self.nodes[c.0];
            if child.shares_raw == FS_USE_PARENT {
                sum.wrapping_add(self.children_level_shares(*c))
            } else {
                sum.wrapping_add(child.shares_raw)
            }
        })
    }

    fn shares_norm_fair_tree(&self, id: AssocId) -> f64 {
        let node = &self.nodes[id.0];
        let fs = match (node.shares_raw == FS_USE_PARENT, node.fs_parent) {
            (true, Some(p)) => &self.nodes[p.0],
            _ => node,
        };
        if fs.level_shares != 0 {
            f64::from(fs.shares_raw) / f64::from(fs.level_shares)
        } else {
            0.0
        }
    }

    fn shares_norm_traditional(&self, id: AssocId) -> f64 {
        let node = &self.nodes[id.0];
        if node.shares_raw == FS_USE_PARENT {
            if let Some(p) = node.fs_parent {
                return self.shares_norm_traditional(p);
            }
        }
        let mut norm = 1.0;
        let mut cur = id;
        while let Some(parent) = self.nodes[cur.0].fs_parent {
            let a = &self.nodes[cur.0];
            if a.shares_raw != FS_USE_PARENT {
                if a.level_shares == 0 {
                    norm = 0.0;
                } else {
                    norm *= f64::from(a.shares_raw) / f64::from(a.level_shares);
                }
            }
            cur = parent;
        }
        norm
    }

    /// `set_assoc_usage_norm`: usage relative to the root's, capped at 1.
    pub(crate) fn set_usage_norm(&mut self, id: AssocId) {
        let root_raw = self.nodes[0].usage_raw;
        let n = &mut self.nodes[id.0];
        n.usage_norm = if root_raw == 0.0 {
            0.0
        } else {
            (n.usage_raw / root_raw).min(1.0)
        };
        if n.usage_norm > 1.0 {
            n.usage_norm = 1.0;
        }
    }

    /// Fair Tree: computes `level_fs` for every node and `fs_factor` = rank / `user_count` for
    /// every user (`_apply_priority_fs`). `user_count` is `g_user_assoc_count`.
    pub fn fair_tree(&mut self, user_count: u32) {
        let mut rank = user_count;
        let mut rnt = rank;
        self.nodes[0].level_fs = NO_VAL_F;
        let children = self.nodes[0].children.clone();
        self.calc_tree_fs(children, &mut rank, &mut rnt, false, user_count);
    }

    /// `_calc_assoc_fs`: U = usage_raw / fs parent's usage_raw, S = shares_norm, LF = S / U.
    fn calc_assoc_fs(&mut self, id: AssocId) {
        let parent_raw = self.nodes[id.0]
            .fs_parent
            .map(|p| self.nodes[p.0].usage_raw);
        self.set_usage_norm(id);
        let n = &mut self.nodes[id.0];
        n.usage_efctv = match parent_raw {
            Some(pr) if pr != 0.0 => n.usage_raw / pr,
            _ => 0.0,
        };
        if n.shares_raw == FS_USE_PARENT {
            n.level_fs = if n.is_user { f64::INFINITY } else { NO_VAL_F };
            return;
        }
        let (u, s) = (n.usage_efctv, n.shares_norm);
        n.level_fs = if s == 0.0 { 0.0 } else { s / u };
    }

    /// `_cmp_level_fs`: higher level_fs first, then users before accounts.
    fn cmp_level_fs(&self, a: AssocId, b: AssocId) -> Ordering {
        let (a, b) = (&self.nodes[a.0], &self.nodes[b.0]);
        if a.level_fs != b.level_fs {
            return if a.level_fs < b.level_fs {
                Ordering::Greater
            } else {
                Ordering::Less
            };
        }
        match (a.is_user, b.is_user) {
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => Ordering::Equal,
        }
    }

    /// `_count_tied_accounts`, including its early exit on the first non-user (which makes it
    /// return 0 for any sorted array; kept to match Slurm).
    fn count_tied_accounts(&self, sibs: &[AssocId], begin: usize) -> usize {
        let lf = self.nodes[sibs[begin].0].level_fs;
        let mut tied = 0;
        for next in &sibs[begin + 1..] {
            let n = &self.nodes[next.0];
            if !n.is_user || n.level_fs != lf {
                break;
            }
            tied += 1;
        }
        tied
    }

    fn calc_tree_fs(
        &mut self,
        mut sibs: Vec<AssocId>,
        rank: &mut u32,
        rnt: &mut u32,
        account_tied: bool,
        user_count: u32,
    ) {
        for &s in &sibs {
            self.calc_assoc_fs(s);
        }
        // glibc's qsort is a merge sort for arrays this size (stable), so a stable sort matches.
        sibs.sort_by(|a, b| self.cmp_level_fs(*a, *b));
        let mut prev_level_fs = NO_VAL_F;
        let mut i = 0;
        while i < sibs.len() {
            let id = sibs[i];
            let lf = self.nodes[id.0].level_fs;
            let tied = if i == 0 && account_tied {
                true
            } else {
                prev_level_fs == lf
            };
            if self.nodes[id.0].is_user {
                if !tied {
                    *rank = *rnt;
                }
                self.nodes[id.0].fs_factor = f64::from(*rank) / f64::from(user_count);
                *rnt = rnt.wrapping_sub(1);
            } else {
                let merge = self.count_tied_accounts(&sibs, i);
                let mut children = Vec::new();
                for s in &sibs[i..=i + merge] {
                    children.extend(self.nodes[s.0].children.iter().copied());
                }
                self.calc_tree_fs(children, rank, rnt, tied, user_count);
                i += merge;
            }
            prev_level_fs = lf;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// root → {a (shares 1), b (shares 1)}; a → {u1, u2}; b → {u3}.
    fn tree(u1: f64, u2: f64, u3: f64) -> AssocTree {
        let mut t = AssocTree::new();
        let r = t.root();
        let a = t.add(r, false, 1, 0.0);
        let b = t.add(r, false, 1, 0.0);
        let x = t.add(a, true, 1, 0.0);
        let y = t.add(a, true, 1, 0.0);
        let z = t.add(b, true, 1, 0.0);
        t.add_usage_upwards(x, u1);
        t.add_usage_upwards(y, u2);
        t.add_usage_upwards(z, u3);
        t.normalise_shares(true);
        t
    }

    #[test]
    fn no_usage_ties_everyone_at_one() {
        let mut t = tree(0.0, 0.0, 0.0);
        t.fair_tree(3);
        for id in [3, 4, 5] {
            assert_eq!(t.nodes[id].fs_factor, 1.0, "node {id}");
        }
    }

    #[test]
    fn ranks_by_level_then_within_account() {
        // a used 30 (u1 10, u2 20), b used 10: b is under-served (LF 0.5/0.25 = 2) so u3 ranks
        // first (3/3); in a (LF 0.5/0.75), u1 (LF 0.5/(1/3) = 1.5) before u2 (0.75).
        let mut t = tree(10.0, 20.0, 10.0);
        t.fair_tree(3);
        assert_eq!(t.nodes[5].fs_factor, 1.0);
        assert_eq!(t.nodes[3].fs_factor, 2.0 / 3.0);
        assert_eq!(t.nodes[4].fs_factor, 1.0 / 3.0);
        assert_eq!(t.nodes[1].level_fs, 0.5 / 0.75);
    }

    #[test]
    fn tied_users_share_rank_and_skip() {
        let mut t = tree(10.0, 10.0, 0.0);
        t.fair_tree(3);
        assert_eq!(t.nodes[5].fs_factor, 1.0); // b has no usage: LF = inf
        assert_eq!(t.nodes[3].fs_factor, 2.0 / 3.0);
        assert_eq!(t.nodes[4].fs_factor, 2.0 / 3.0);
    }

    #[test]
    fn zero_shares_rank_last() {
        let mut t = AssocTree::new();
        let r = t.root();
        let a = t.add(r, false, 0, 0.0);
        let b = t.add(r, false, 1, 0.0);
        let x = t.add(a, true, 1, 0.0);
        let y = t.add(b, true, 1, 0.0);
        t.add_usage_upwards(y, 5.0);
        t.normalise_shares(true);
        t.fair_tree(2);
        assert_eq!(t.nodes[x.0].fs_factor, 0.5);
        assert_eq!(t.nodes[y.0].fs_factor, 1.0);
    }
}
