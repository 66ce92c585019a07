/* The collector's C header compiled as C (C11) and used from C: create on
 * the simulated GPU, start, stop, write a run. Exit 0 on success; argv[1] is
 * the log directory. */
#include <stdio.h>

#include "include/chronolink/collector.h"

int main(int argc, char** argv) {
  char err[256];
  if (argc < 2) return 2;
  if (chronolink_collector_api_version() != CHRONOLINK_COLLECTOR_API_VERSION) return 3;
  chronolink_collector* c = chronolink_collector_create(
      "{\"backend\": \"simulated\", \"backend_settings\": \"devices=1\", \"host\": \"from_c\"}", err, sizeof err);
  if (c == NULL) {
    fprintf(stderr, "create: %s\n", err);
    return 1;
  }
  if (!chronolink_collector_start(c, err, sizeof err)) {
    fprintf(stderr, "start: %s\n", err);
    return 1;
  }
  chronolink_collector_stop(c);
  if (!chronolink_collector_write_run(c, argv[1], "c_smoke", err, sizeof err)) {
    fprintf(stderr, "write: %s\n", err);
    return 1;
  }
  chronolink_collector_destroy(c);
  printf("ok\n");
  return 0;
}
