//! Classic fair share (`PriorityFlags=NO_FAIR_TREE` or `DEPTH_OBLIVIOUS`).
//!
//! Mirrors `priority_p_set_assoc_usage` (`set_assoc_usage_norm` + `_set_assoc_usage_efctv`,
//! `_set_usage_efctv`, `_depth_oblivious_set_usage_efctv`) and `priority_p_calc_fs_factor` in
//! priority_multifactor.c. Slurm computes these in `long double`; see the float note in
//! [`super`]. The plugin's exported `priority_p_calc_fs_factor` is a C shim with the same body
//! as [`calc_fs_factor`], because Rust cannot take `long double` arguments.

use super::FS_USE_PARENT;
use super::fair_tree::{AssocId, AssocTree};

const NO_VAL_F: f64 = 0xffff_fffe_u32 as f64;

/// `priority_p_calc_fs_factor`: `2^(-(usage_efctv / shares_norm) / damp)`, 0 when the usage is
/// unset (`NO_VAL`) or the shares are ≤ 0.
pub fn calc_fs_factor(usage_efctv: f64, shares_norm: f64, damp_factor: u16) -> f64 {
    let d = usage_efctv - NO_VAL_F;
    if d > -0.00001 && d < 0.00001 {
        return 0.0;
    }
    if shares_norm <= 0.0 {
        return 0.0;
    }
    2f64.powf(-((usage_efctv / shares_norm) / f64::from(damp_factor)))
}

/// Computes `usage_norm` and `usage_efctv` for every association top-down (the decay thread's
/// `_set_children_usage_efctv` followed by the per-user on-demand call in
/// `_get_fairshare_priority`), then stores `calc_fs_factor` in each node's `fs_factor`.
pub fn classic_fair_share(tree: &mut AssocTree, depth_oblivious: bool, damp_factor: u16) {
    tree.nodes[0].usage_efctv = 1.0;
    let mut stack: Vec<AssocId> = tree.nodes[0].children.iter().rev().copied().collect();
    while let Some(id) = stack.pop() {
        set_assoc_usage(tree, id, depth_oblivious);
        let n = &tree.nodes[id.0];
        let fs_node = match (n.shares_raw == FS_USE_PARENT, n.fs_parent) {
            (true, Some(p)) => p,
            _ => id,
        };
        let (ue, sn) = (
            tree.nodes[fs_node.0].usage_efctv,
            tree.nodes[fs_node.0].shares_norm,
        );
        tree.nodes[id.0].fs_factor = calc_fs_factor(ue, sn, damp_factor);
        stack.extend(tree.nodes[id.0].children.iter().rev().copied());
    }
}

/// `priority_p_set_assoc_usage` for one node (its fs parent must be done).
pub fn set_assoc_usage(tree: &mut AssocTree, id: AssocId, depth_oblivious: bool) {
    tree.set_usage_norm(id);
    let Some(parent) = tree.nodes[id.0].fs_parent else {
        return;
    };
    let efctv = if parent == tree.root() {
        tree.nodes[id.0].usage_norm
    } else if tree.nodes[id.0].shares_raw == FS_USE_PARENT {
        tree.nodes[parent.0].usage_efctv
    } else if depth_oblivious {
        depth_oblivious_usage_efctv(tree, id, parent)
    } else {
        let n = &tree.nodes[id.0];
        let ua_child = n.usage_norm;
        let ue_parent = tree.nodes[parent.0].usage_efctv;
        if n.level_shares == 0 {
            ue_parent
        } else {
            ua_child
                + (ue_parent - ua_child) * (f64::from(n.shares_raw) / f64::from(n.level_shares))
        }
    };
    tree.nodes[id.0].usage_efctv = efctv;
}

fn depth_oblivious_usage_efctv(tree: &AssocTree, id: AssocId, parent: AssocId) -> f64 {
    let n = &tree.nodes[id.0];
    let p = &tree.nodes[parent.0];
    let f = 5.0f64;
    if n.shares_norm != 0.0 && p.shares_norm != 0.0 && p.usage_efctv != 0.0 && n.usage_norm != 0.0 {
        let ratio_p = p.usage_efctv / p.shares_norm;
        let mut ratio_s = 0.0;
        for s in &p.children {
            let sib = &tree.nodes[s.0];
            if sib.shares_raw != FS_USE_PARENT {
                ratio_s += sib.usage_norm;
            }
        }
        ratio_s /= p.shares_norm;
        let ratio_l = (n.usage_norm / n.shares_norm) / ratio_s;
        let k = if ratio_p == 0.0 || ratio_l == 0.0 || ratio_p.ln() * ratio_l.ln() >= 0.0 {
            1.0
        } else {
            1.0 / (1.0 + (f * ratio_p.ln()).powi(2))
        };
        ratio_p * ratio_l.powf(k) * n.shares_norm
    } else {
        n.usage_norm
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fs_factor_matches_formula() {
        assert_eq!(calc_fs_factor(0.0, 0.5, 1), 1.0);
        assert_eq!(calc_fs_factor(0.5, 0.5, 1), 0.5);
        assert_eq!(calc_fs_factor(1.0, 0.5, 2), 0.5);
        assert_eq!(calc_fs_factor(0.3, 0.0, 1), 0.0);
        assert_eq!(calc_fs_factor(NO_VAL_F, 0.5, 1), 0.0);
    }

    #[test]
    fn usage_efctv_blends_parent_and_child() {
        // root → a (1) , b (3); a → u (1), v (1). a used 40 of 100 (u 40), b 60.
        let mut t = AssocTree::new();
        let r = t.root();
        let a = t.add(r, false, 1, 0.0);
        let b = t.add(r, false, 3, 0.0);
        let u = t.add(a, true, 1, 0.0);
        let v = t.add(a, true, 1, 0.0);
        let w = t.add(b, true, 1, 0.0);
        t.add_usage_upwards(u, 40.0);
        t.add_usage_upwards(w, 60.0);
        t.normalise_shares(false);
        classic_fair_share(&mut t, false, 1);
        assert_eq!(t.nodes[a.0].usage_efctv, 0.4);
        // UE(u) = 0.4 + (0.4 - 0.4) * 1/2 = 0.4; shares_norm(u) = 1/4 * 1/2.
        assert_eq!(t.nodes[u.0].usage_efctv, 0.4);
        assert_eq!(t.nodes[u.0].shares_norm, 0.125);
        assert_eq!(t.nodes[u.0].fs_factor, 2f64.powf(-(0.4 / 0.125)));
        // v: 0 + (0.4 - 0) * 1/2 = 0.2.
        assert_eq!(t.nodes[v.0].usage_efctv, 0.2);
        assert!(t.nodes[v.0].fs_factor > t.nodes[u.0].fs_factor);
    }
}
