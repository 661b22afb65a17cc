/* gputopo: the plugin's only C. Rust has no `long double`, which priority_p_calc_fs_factor
 * takes (slurm_priority_ops_t in src/interfaces/priority.c; 22.05 src/common/slurm_priority.c)
 * and slurmdb_assoc_usage_t stores (usage_raw, usage_norm, usage_efctv, level_fs).
 * Same body as multifactor's priority_p_calc_fs_factor; damp = FairShareDampeningFactor.
 * 25.11 removed calc_fs_factor from the priority API: build.rs then leaves
 * GPUTOPO_CALC_FS_FACTOR undefined and only the long double accessors remain. */
#include <math.h>
#include <stdint.h>
uint16_t gputopo_priority_damp_factor = 1;
#ifdef GPUTOPO_CALC_FS_FACTOR
double priority_p_calc_fs_factor(long double usage_efctv, long double shares_norm)
{
	long double d = usage_efctv - 0xfffffffe; /* fuzzy_equal(usage_efctv, NO_VAL) */
	if ((d > -0.00001 && d < 0.00001) || shares_norm <= 0)
		return 0.0;
	return pow(2.0, -((usage_efctv / shares_norm) / gputopo_priority_damp_factor));
}
#endif
double gputopo_ld_get(const long double *p) { return (double) *p; }
void gputopo_ld_set(long double *p, double v) { *p = v; }
