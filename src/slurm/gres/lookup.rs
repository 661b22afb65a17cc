//! Finding a node's GRES state by name ([`node_gres`]): it runs for every candidate node on
//! every `select_p_job_test`, so it is one `list_find_first_ro` with a C-ABI predicate (one
//! read lock for the walk), not a list iterator (allocated, locked and freed per node), and
//! the predicate compares one integer, the GRES plugin id, as Slurm's own lookups do.

use super::NodeGres;
use crate::ffi;
use crate::slurm::list::ListRef;

/// The plugin id Slurm gives the GRES named `name` (src/interfaces/gres.c `gres_build_id`,
/// 22.05 src/common/gres.c: each byte, as a C `char`, shifted left by 0, 8, 16, 24, 0, ...
/// bits and summed with wrap-around). Every `gres_state_t` of a node's `gres_list` carries
/// the id of its name (`gres_create_state`, `gres_node_feature`), Slurm finds node GRES
/// states by it (`gres_find_id`), and it refuses two GRES plugins with one id
/// (`gres_init`: "Duplicate plugin_id"), so the id names the state as the name does.
pub const fn plugin_id(name: &str) -> u32 {
    let b = name.as_bytes();
    let (mut id, mut i, mut shift) = (0u32, 0, 0);
    while i < b.len() && b[i] != 0 {
        // `name[i] << j` in C: the char (signed on x86-64) promoted to int, then shifted.
        let c = b[i] as i8 as i32 as u32;
        id = id.wrapping_add(c.wrapping_shl(shift));
        shift = (shift + 8) % 32;
        i += 1;
    }
    id
}

/// The node GRES state named `name` in a node's `gres_list`.
///
/// # Safety
/// `list` is null or the live `gres_list` of a node record, not modified during `'a` (the
/// caller holds the slurmctld node lock, as every `select_p_*` call does).
pub unsafe fn node_gres<'a>(list: *mut ffi::xlist, name: &str) -> Option<NodeGres<'a>> {
    // SAFETY: node gres_list elements are gres_state_t of state type NODE, alive for 'a.
    let list = unsafe { ListRef::<ffi::gres_state_t>::from_raw(list) }?;
    let id = plugin_id(name);
    // Runs per candidate node on every call: one `list_find_first_ro`, no iterator.
    // SAFETY: `with_id_and_data` reads a gres_state_t element and a `u32` key, no panic.
    let state = unsafe { list.find_first(with_id_and_data, &id) }?;
    // SAFETY: gres_data of a node gres_state_t is a gres_node_state_t, alive for 'a.
    let ns = unsafe { &*state.gres_data.cast::<ffi::gres_node_state_t>() };
    Some(NodeGres { ns })
}

/// [`node_gres`]'s predicate, called by Slurm's `list_find_first_ro`: the `gres_state_t`
/// `x` has the plugin id `*key` (a `u32`) and has data. Compares integers only, so it
/// cannot panic.
unsafe extern "C" fn with_id_and_data(x: *mut std::ffi::c_void, key: *mut std::ffi::c_void) -> i32 {
    // SAFETY: Slurm passes an element of a node gres_list: null or a live gres_state_t.
    let Some(state) = (unsafe { x.cast::<ffi::gres_state_t>().as_ref() }) else {
        return 0;
    };
    // SAFETY: node_gres passes a `&u32` as the key, alive for the call.
    let want = unsafe { *key.cast::<u32>() };
    i32::from(state.plugin_id == want && !state.gres_data.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slurm::gres::GPU;

    /// `node_gres` finds the state by name (its plugin id) through `list_find_first_ro` and
    /// the C-ABI predicate, skipping states of other names and states without data.
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
                s.plugin_id = plugin_id(name.to_str().expect("ASCII"));
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
        // SAFETY: no view is used after this; the list has no element destructor.
        unsafe { ffi::slurm_list_destroy(list) };
    }

    /// The ids Slurm's `gres_build_id` gives: fixed values (computed with its C expression),
    /// and, where libslurmfull exports the function (every release so far), its own answer.
    #[test]
    fn plugin_ids_are_slurms() {
        let names = [
            "gpu",
            "shard",
            "mps",
            "nic",
            "\u{e9}",
            "a_much_longer_gres_name",
            "",
        ];
        let fixed = [
            0x0075_7067,
            0x7261_68d7,
            0x0073_706d,
            0x0063_696e,
            0xffff_a8c3,
        ];
        for (name, id) in names.iter().zip(fixed) {
            assert_eq!(plugin_id(name), id, "{name:?}");
        }
        crate::ctld_symbol!(
            /// libslurmfull's `uint32_t gres_build_id(char *name)` (src/interfaces/gres.h).
            GRES_BUILD_ID: fn(*mut std::ffi::c_char) -> u32 = "gres_build_id"
        );
        let Some(build_id) = GRES_BUILD_ID.get() else {
            eprintln!("gres_build_id not exported by this libslurmfull: fixed values only");
            return;
        };
        for name in names {
            let c = std::ffi::CString::new(name).expect("no NUL");
            // SAFETY: a NUL-terminated string that the function only reads.
            let slurm = unsafe { build_id(c.as_ptr().cast_mut()) };
            assert_eq!(plugin_id(name), slurm, "{name:?}");
        }
    }
}
