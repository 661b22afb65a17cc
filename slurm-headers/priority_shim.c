/* gputopo: the plugin's only C. Rust has no `long double`, which priority_p_calc_fs_factor
 * takes (slurm_priority_ops_t in src/interfaces/priority.c; 22.05 src/common/slurm_priority.c)
 * and slurmdb_assoc_usage_t/slurmdb_qos_usage_t store (usage_raw, usage_tres_raw[],
 * usage_norm, usage_efctv, level_fs). The arithmetic on them is done here, in the very
 * expressions multifactor uses (priority_multifactor.c _apply_decay, _apply_new_usage,
 * _handle_*_tres_run_secs, _reset_usage), so the sums are C's x87 long double sums.
 * Same body as multifactor's priority_p_calc_fs_factor; damp = FairShareDampeningFactor.
 * 25.11 removed calc_fs_factor from the priority API: build.rs then leaves
 * GPUTOPO_CALC_FS_FACTOR undefined and only the long double accessors remain. */
#include <math.h>
#include <stddef.h>
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
/* usage_raw += (long double) real_decay */
void gputopo_ld_add(long double *p, double v) { *p += (long double) v; }
/* usage_tres_raw[i] += (long double) run_decay * (long double) tres_alloc_cnt[i] */
void gputopo_ld_add_prod(long double *p, double a, uint64_t b)
{
	*p += (long double) a * (long double) b;
}
/* usage_raw *= real_decay; usage_tres_raw[0..n] *= real_decay (n = 1 for a scalar) */
void gputopo_ld_scale(long double *p, size_t n, double v)
{
	for (size_t i = 0; i < n; i++)
		p[i] *= v;
}
/* usage_tres_raw[0..n] = 0 */
void gputopo_ld_zero(long double *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = 0;
}
