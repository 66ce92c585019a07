/* chronolink GPU collector, C API: for profiler plugins and other languages.
 * Links against libchronolink_collector.so. Every call is thread-safe and
 * returns promptly (no call waits longer than a few sampling periods).
 *
 *   char err[256];
 *   chronolink_collector* c = chronolink_collector_create(
 *       "{\"backend\": \"auto\", \"sample_period_ms\": 100}", err, sizeof err);
 *   if (!c) { fprintf(stderr, "%s\n", err); ... }
 *   chronolink_collector_start(c, err, sizeof err);
 *   ... the application runs ...
 *   chronolink_collector_stop(c);            (optional before export)
 *   while (chronolink_collector_stop_mapped(c) == 0 && waited < 15 s) sleep 200 ms;
 *   chronolink_collector_write_run(c, "/tmp/logdir", "run1", err, sizeof err);
 *   chronolink_collector_destroy(c);
 *
 * Options: a JSON object with the keys of the collector's options file
 * (docs/collector.md); CHRONOLINK_* environment variables and
 * CHRONOLINK_COLLECTOR_CONFIG apply below it, as for the CLI. NULL or "" for
 * none. Errors: functions that can fail return 0 (or NULL) and write one
 * NUL-terminated line into err (truncated to err_len) when err is not NULL.
 */
#ifndef CHRONOLINK_COLLECTOR_H_
#define CHRONOLINK_COLLECTOR_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CHRONOLINK_COLLECTOR_API_VERSION 2  /* 2: chronolink_collector_stop_mapped */

typedef struct chronolink_collector chronolink_collector;

int chronolink_collector_api_version(void);

chronolink_collector* chronolink_collector_create(const char* options_json, char* err, size_t err_len);
void chronolink_collector_destroy(chronolink_collector* c);

int chronolink_collector_start(chronolink_collector* c, char* err, size_t err_len);
void chronolink_collector_stop(chronolink_collector* c);

/* After stop: whether the agent's clock page maps the stop yet (it trails
 * the host clock by the leader's solve lag, 7.3 s at the defaults; reads
 * the page now). 1: mapped, export now; 0: not yet, ask again (every few
 * hundred ms, for up to ~15 s; exported earlier, a run's last seconds are
 * extrapolated); -1: none will come (no page, no mapping at all, the agent
 * stopped, or not stopped). docs/collector.md. */
int chronolink_collector_stop_mapped(chronolink_collector* c);

/* Appends the device planes and the clock plane to a serialized XSpace the
 * host profiler built (in, in_len; NULL/0 for an empty one) and returns the
 * new serialization in *out (free it with chronolink_collector_free). */
int chronolink_collector_export_xspace(chronolink_collector* c, const void* in, size_t in_len, void** out,
                                       size_t* out_len, char* err, size_t err_len);
/* Writes <logdir>/plugins/profile/<run>/<host>.xplane.pb. */
int chronolink_collector_write_run(chronolink_collector* c, const char* logdir, const char* run, char* err,
                                   size_t err_len);

/* Times a region of work on a device queue (stream: hipStream_t /
 * cudaStream_t, NULL for the default one). Returns a region id > 0, or 0. */
uint64_t chronolink_collector_region_begin(chronolink_collector* c, uint32_t device, void* stream,
                                           const char* name, char* err, size_t err_len);
int chronolink_collector_region_end(chronolink_collector* c, uint64_t region, char* err, size_t err_len);

/* Times a kernel the application dispatched through HSA itself (rocm
 * backend): its queue has profiling enabled and its completion signal has
 * completed. agent_handle / signal_handle: the .handle of hsa_agent_t and
 * hsa_signal_t; queue: the stream line it is drawn on. 1 on success. */
int chronolink_collector_hsa_dispatch(chronolink_collector* c, uint32_t device, uint64_t agent_handle,
                                      uint64_t signal_handle, uint32_t queue, const char* name, char* err,
                                      size_t err_len);

/* The collector's state as a JSON object (backend, devices, map statistics,
 * activity counters, clock page state); free with chronolink_collector_free. */
char* chronolink_collector_status_json(chronolink_collector* c);

void chronolink_collector_free(void* p);

#ifdef __cplusplus
}
#endif

#endif /* CHRONOLINK_COLLECTOR_H_ */
