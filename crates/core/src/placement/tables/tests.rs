use super::*;
use crate::placement::objective;
use crate::topology::fixture;

fn dgx1v() -> NodeTopology {
    fixture::parse(include_str!("../../../../../contrib/topologies/dgx1v.topo")).unwrap()
}

#[test]
fn tables_match_direct_computation() {
    let t = dgx1v();
    let tab = TopoTables::new(&t).unwrap();
    for s in 0..256u32 {
        let set = GpuSet::from_bits(s);
        assert_eq!(tab.score(set), objective::score(&t, set), "{set:?}");
        assert_eq!(tab.leftover(set).pairs, objective::pair_matching(&t, set));
        for k in 1..=8 {
            assert_eq!(
                Score::from_packed(tab.best(k)[s as usize]),
                objective::best_subset_score(&t, set, k)
            );
        }
        let mut eval = objective::Evaluator::new(&t);
        assert_eq!(tab.leftover(set), eval.leftover(set));
    }
}
