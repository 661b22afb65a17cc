//! Finding a node's GRES state by name ([`node_gres`]): it runs for every candidate node on
//! every `select_p_job_test`, so it is one `list_find_first_ro` with a C-ABI predicate (one
//! read lock for the walk), not a list iterator (allocated, locked and freed per node).

use super::NodeGres;
use crate::ffi;
use crate::slurm::list::ListRef;

/// The node GRES state named `name` in a node's `gres_list`.
///
/// # Safety
/// `list` is null or the live `gres_list` of a node record, not modified during `'a` (the
/// caller holds the slurmctld node lock, as every `select_p_*` call does).
pub unsafe fn node_gres<'a>(list: *mut ffi::xlist, name: &str) -> Option<NodeGres<'a>> {
    // SAFETY: node gres_list elements are gres_state_t of state type NODE, alive for 'a.
    let list = unsafe { ListRef::<ffi::gres_state_t>::from_raw(list) }?;
    // Runs per candidate node on every call: one `list_find_first_ro`, no iterator.
    // SAFETY: `named_with_data` reads a gres_state_t element and a `&[u8]` key, no panic.
    let state = unsafe { list.find_first(named_with_data, &name.as_bytes()) }?;
    // SAFETY: gres_data of a node gres_state_t is a gres_node_state_t, alive for 'a.
    let ns = unsafe { &*state.gres_data.cast::<ffi::gres_node_state_t>() };
    Some(NodeGres { ns })
}

/// [`node_gres`]'s predicate, called by Slurm's `list_find_first_ro`: the `gres_state_t`
/// `x` is named `*key` (a `&[u8]`) and has data. Compares bytes only, so it cannot panic.
unsafe extern "C" fn named_with_data(x: *mut std::ffi::c_void, key: *mut std::ffi::c_void) -> i32 {
    // SAFETY: Slurm passes an element of a node gres_list: null or a live gres_state_t.
    let Some(state) = (unsafe { x.cast::<ffi::gres_state_t>().as_ref() }) else {
        return 0;
    };
    if state.gres_name.is_null() || state.gres_data.is_null() {
        return 0;
    }
    // SAFETY: node_gres passes a `&&[u8]` as the key, alive for the call.
    let want: &[u8] = unsafe { *key.cast::<&[u8]>() };
    // SAFETY: gres_name is a NUL-terminated string owned by the gres state (non-null,
    // checked).
    i32::from(unsafe { c_str_is(state.gres_name, want) })
}

/// The NUL-terminated `name` is exactly `want`, compared byte by byte without measuring
/// `name` first (no `strlen`, no `memcmp`: it runs for every candidate node on every call).
/// The walk stops at the first difference or at a NUL in `want` (which no C string holds),
/// so it never reads past `name`'s terminator.
///
/// # Safety
/// `name` is a live NUL-terminated string.
unsafe fn c_str_is(name: *const std::ffi::c_char, want: &[u8]) -> bool {
    for (i, &w) in want.iter().enumerate() {
        if w == 0 {
            return false;
        }
        // SAFETY: bytes 0..i of `name` matched non-NUL bytes of `want`, so its terminator
        // is at `i` or later: byte `i` is within the string.
        let b = unsafe { name.wrapping_add(i).cast::<u8>().read() };
        if b != w {
            return false;
        }
    }
    // SAFETY: the first `want.len()` bytes of `name` were non-NUL, so byte `want.len()` is
    // within the string (its terminator at the latest).
    let end = unsafe { name.wrapping_add(want.len()).cast::<u8>().read() };
    end == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::gres::GPU;

    /// `node_gres` finds the state by name through `list_find_first_ro` and the C-ABI
    /// predicate, skipping states of other names and states without data.
    #[test]
    fn node_gres_finds_the_named_state_with_data() {
        // SAFETY: plain C structs of integers and pointers: all-zero is a valid value.
        let mut gpu_ns: ffi::gres_node_state_t = unsafe { std::mem::zeroed() };
        gpu_ns.gres_cnt_avail = 8;
        // SAFETY: as above.
        let mut shard_ns: ffi::gres_node_state_t = unsafe { std::mem::zeroed() };
        shard_ns.gres_cnt_avail = 32;
        let mut names = [c"shard".to_owned(), c"gpu".to_owned(), c"gpu".to_owned()];
        let data: [*mut ffi::gres_node_state_t; 3] = [
            std::ptr::from_mut(&mut shard_ns),
            std::ptr::null_mut(), // a "gpu" state without data is skipped
            std::ptr::from_mut(&mut gpu_ns),
        ];
        let mut states: Vec<ffi::gres_state_t> = names
            .iter_mut()
            .zip(data)
            .map(|(name, d)| {
                // SAFETY: as above.
                let mut s: ffi::gres_state_t = unsafe { std::mem::zeroed() };
                s.gres_name = name.as_ptr().cast_mut();
                s.gres_data = d.cast();
                s
            })
            .collect();
        // SAFETY: a list without destructor; its elements are owned by this test.
        let list = unsafe { ffi::slurm_list_create(None) };
        for s in &mut states {
            // SAFETY: live list; the element outlives it.
            unsafe { ffi::slurm_list_append(list, std::ptr::from_mut(s).cast()) };
        }
        // SAFETY: a live list of gres_state_t whose data are gres_node_state_t.
        let found = unsafe { node_gres(list, GPU) }.map(|g| (g.count(), g.id()));
        assert_eq!(found, Some((8, std::ptr::from_ref(&gpu_ns) as usize)));
        // SAFETY: as above.
        let shard = unsafe { node_gres(list, "shard") };
        assert_eq!(shard.map(|g| g.count()), Some(32));
        // SAFETY: as above.
        assert!(unsafe { node_gres(list, "mps") }.is_none());
        // SAFETY: null is no list.
        assert!(unsafe { node_gres(std::ptr::null_mut(), GPU) }.is_none());
        for (name, want, same) in [
            (c"gpu", "gpu", true),
            (c"gp", "gpu", false),
            (c"gpus", "gpu", false),
            (c"", "gpu", false),
            (c"", "", true),
            (c"mps", "gpu", false),
            (c"gp", "gp\0u", false),
        ] {
            // SAFETY: a NUL-terminated literal.
            let got = unsafe { c_str_is(name.as_ptr(), want.as_bytes()) };
            assert_eq!(got, same, "{name:?} {want}");
        }
        // SAFETY: no view is used after this; the list has no element destructor.
        unsafe { ffi::slurm_list_destroy(list) };
    }
}
