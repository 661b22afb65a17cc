//! Fair share over assoc_mgr's association tree when slurmdbd is present, as multifactor's
//! decay thread computes it: Fair Tree stores `fs_factor`, `level_fs`, `usage_efctv` and
//! `usage_norm` (`fair_tree.c`'s `_apply_priority_fs`), which `priority_p_set`, sprio and
//! sshare read; classic fair share sets `usage_norm`/`usage_efctv` (and `fs_factor`) of every
//! association (`_set_children_usage_efctv`), which `calc_fs_factor` reads per job. The usage
//! they rank is charged by [`super::usage`]. Everything runs under the assoc_mgr association
//! write lock (taken here).

use gputopo_core::priority::{AssocId, AssocNode, AssocTree};

use super::{AssocLock, long_double};
use crate::ffi;
use crate::slurm::list::ListRef;

type Assoc = ffi::slurmdb_assoc_rec_t;

fn children(a: *mut Assoc) -> Vec<*mut Assoc> {
    // SAFETY: live association (assoc write lock held by the caller of this module's fns).
    let Some(u) = (unsafe { a.as_ref() }).and_then(|a| {
        // SAFETY: as above.
        unsafe { a.usage.as_ref() }
    }) else {
        return Vec::new();
    };
    // SAFETY: children_list holds association pointers owned by assoc_mgr.
    match unsafe { ListRef::<Assoc>::from_raw(u.children_list) } {
        Some(l) => l.iter_ptrs().map(std::ptr::NonNull::as_ptr).collect(),
        None => Vec::new(),
    }
}

/// Whether assoc_mgr has its association tree (a root) yet.
pub fn tree_exists() -> bool {
    let root = &raw const ffi::assoc_mgr_root_assoc;
    // SAFETY: libslurmfull global; a pointer-sized read (set once associations load).
    !unsafe { root.read() }.is_null()
}

/// Fair Tree over assoc_mgr's tree; stores the results in the association records. Returns
/// false when assoc_mgr has no tree yet (22.05 starts the role with `select/gputopo`, before
/// slurmctld loads associations).
pub fn fair_tree_pass() -> bool {
    let _lock = AssocLock::write_assoc();
    let Some((mut tree, ptrs)) = read_tree() else {
        return false;
    };
    let users = &raw const ffi::g_user_assoc_count;
    // SAFETY: libslurmfull global (assoc lock held).
    let users = unsafe { users.read() };
    tree.fair_tree(users);
    log::debug!(
        "fair tree over {} associations, {} users: {:?}",
        tree.nodes.len(),
        users,
        tree.nodes
            .iter()
            .map(|n| (n.is_user, n.shares_norm, n.level_fs, n.fs_factor))
            .collect::<Vec<_>>()
    );
    write_tree(&tree, &ptrs, FsFactor::Users);
    true
}

/// Classic fair share (`NO_FAIR_TREE`, `DEPTH_OBLIVIOUS`) over assoc_mgr's tree: what
/// multifactor's decay thread does with `_set_children_usage_efctv` after each decay, so
/// `usage_norm`/`usage_efctv` (read by `calc_fs_factor` per job, sprio and sshare) follow the
/// usage instead of staying at their values from startup. Returns false without a tree yet.
pub fn classic_pass(depth_oblivious: bool, damp_factor: u16) -> bool {
    let _lock = AssocLock::write_assoc();
    let Some((mut tree, ptrs)) = read_tree() else {
        return false;
    };
    gputopo_core::priority::classic::classic_fair_share(&mut tree, depth_oblivious, damp_factor);
    write_tree(&tree, &ptrs, FsFactor::All);
    true
}

/// Which nodes get `fs_factor` written: Fair Tree ranks users only; classic fair share has a
/// factor for every association.
enum FsFactor {
    Users,
    All,
}

/// assoc_mgr's association tree as plain data, and the record behind each node (same index).
/// None while assoc_mgr has no root. The caller holds the assoc_mgr association lock.
fn read_tree() -> Option<(AssocTree, Vec<*mut Assoc>)> {
    let root = &raw const ffi::assoc_mgr_root_assoc;
    // SAFETY: libslurmfull global (assoc lock held by the caller).
    let root = unsafe { root.read() };
    if root.is_null() {
        return None;
    }
    let mut tree = AssocTree::new();
    let mut ptrs: Vec<*mut Assoc> = vec![root];
    let node = |a: *mut Assoc| {
        // SAFETY: live association and usage (lock held).
        let rec = unsafe { &*a };
        // SAFETY: as above.
        let u = unsafe { rec.usage.as_ref() };
        AssocNode {
            is_user: !rec.user.is_null(),
            shares_raw: rec.shares_raw,
            // SAFETY: long double field of a live usage record.
            usage_raw: u.map_or(0.0, |u| unsafe { long_double::get(&u.usage_raw) }),
            shares_norm: u.map_or(0.0, |u| u.shares_norm),
            level_shares: u.map_or(0, |u| u.level_shares),
            ..Default::default()
        }
    };
    tree.nodes[0] = node(root);
    let mut stack = vec![(AssocId(0), root)];
    while let Some((id, a)) = stack.pop() {
        for c in children(a) {
            let cid = tree.add_child_of(id, node(c));
            ptrs.push(c);
            stack.push((cid, c));
        }
    }
    // Children must be in list order for tie handling; the DFS above appends per parent in
    // order, so `children` vectors are already in Slurm's order.
    Some((tree, ptrs))
}

/// Stores `fs_factor`, `usage_efctv`, `usage_norm` (and with Fair Tree `level_fs`) of every
/// node in its record (root keeps its own usage and gets multifactor's effective usage of 1). The caller holds the assoc_mgr association write lock.
fn write_tree(tree: &AssocTree, ptrs: &[*mut Assoc], fs: FsFactor) {
    for (i, a) in ptrs.iter().enumerate() {
        let n = &tree.nodes[i];
        // SAFETY: live association record (assoc write lock held).
        let usage = unsafe { (**a).usage };
        // SAFETY: its usage record, allocated with it; write lock held.
        let Some(u) = (unsafe { usage.as_mut() }) else {
            continue;
        };
        if n.is_user || (matches!(fs, FsFactor::All) && i > 0) {
            u.fs_factor = n.fs_factor;
        }
        if i == 0 {
            // Root's effective usage is 1, as multifactor's init sets it with slurmdbd (22.05.8
            // priority_multifactor.c:1742, 24.11.5 :1804, 25.11.7 :1821); sshare shows it.
            // SAFETY: long double field of a live usage record; write lock held.
            unsafe { long_double::set(&mut u.usage_efctv, 1.0) };
        } else {
            if matches!(fs, FsFactor::Users) {
                // SAFETY: long double field of a live usage record (Fair Tree's level value).
                unsafe { long_double::set(&mut u.level_fs, n.level_fs) };
            }
            // SAFETY: as above.
            unsafe { long_double::set(&mut u.usage_efctv, n.usage_efctv) };
            // SAFETY: as above.
            unsafe { long_double::set(&mut u.usage_norm, n.usage_norm) };
        }
    }
}
