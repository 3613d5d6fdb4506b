/* A simulation writing its output through strata's C API, then reading it back.
 *
 *   cc heat.c -I crates/strata-capi/include -L $TARGET/release -lstrata -o heat
 *   ./heat out.strata [steps]
 *
 * It defines the dimensions and variables, writes the grid, appends one time step at a
 * time (strata lays out and compresses each slab as it fills) and commits; then it opens
 * the store, reads one step back and counts hot cells with a value query. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strata.h"

#define NY 96
#define NX 192

static int check(StrataStatus s, const char *what) {
    if (s != STRATA_STATUS_OK) {
        fprintf(stderr, "%s failed (status %d): %s\n", what, (int)s, strata_last_error());
        exit(1);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT.strata [STEPS]\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    int steps = argc > 2 ? atoi(argv[2]) : 40;

    StrataWriter *w = NULL;
    check(strata_create(path,
                        "codec = \"auto\"\nlayout = \"V-S\"\nbinning = \"280,285,290,295\"\n"
                        "[variables.depth]\nchunks = { lat = 32, lon = 192 }\n",
                        &w),
          "create");
    check(strata_def_dim(w, "time", 0), "def_dim time");
    check(strata_def_dim(w, "lat", NY), "def_dim lat");
    check(strata_def_dim(w, "lon", NX), "def_dim lon");
    const char *t_dims[] = {"time"};
    const char *lat_dims[] = {"lat"};
    const char *field_dims[] = {"time", "lat", "lon"};
    check(strata_def_var(w, "time", STRATA_TYPE_F64, 1, t_dims), "def_var time");
    check(strata_def_var(w, "lat", STRATA_TYPE_F32, 1, lat_dims), "def_var lat");
    check(strata_def_var(w, "temp", STRATA_TYPE_F32, 3, field_dims), "def_var temp");
    const char *map_dims[] = {"lat", "lon"};
    check(strata_def_var(w, "depth", STRATA_TYPE_F32, 2, map_dims), "def_var depth");
    check(strata_put_att_text(w, "temp", "units", "K"), "put_att");
    check(strata_put_att_text(w, "time", "units", "hours since 2020-01-01"), "put_att");
    check(strata_put_att_text(w, NULL, "title", "2-D heat diffusion from C"), "put_att");
    double fill = -999.0;
    check(strata_put_att_double(w, "temp", "missing_value", 1, &fill), "put_att");

    float lat[NY];
    for (int j = 0; j < NY; j++) lat[j] = -89.0f + 178.0f * j / (NY - 1);
    check(strata_write(w, "lat", (const uint8_t *)lat, sizeof lat), "write lat");

    /* A fixed field written a block of whole chunks at a time, as a program too large to
       hold it would: strata_static_block says how much fits at once (here all of it). */
    uint64_t most[2];
    check(strata_static_block(w, "depth", 2, most), "static_block depth");
    printf("depth fits in blocks of %llu x %llu\n", (unsigned long long)most[0], (unsigned long long)most[1]);
    static float rows[32][NX];
    for (int j0 = NY - 32; j0 >= 0; j0 -= 32) {  /* any order: here the last rows first */
        for (int j = 0; j < 32; j++)
            for (int i = 0; i < NX; i++) rows[j][i] = 1000.0f + 10.0f * (j0 + j) + i;
        uint64_t start[2] = {(uint64_t)j0, 0}, count[2] = {32, NX};
        check(strata_write_block(w, "depth", 2, start, count, (const uint8_t *)rows, sizeof rows), "write depth");
    }

    static double field[NY][NX], next[NY][NX];
    static float out[NY][NX];
    for (int j = 0; j < NY; j++)
        for (int i = 0; i < NX; i++)
            field[j][i] = 280.0 + 20.0 * exp(-((j - NY / 2.0) * (j - NY / 2.0) + (i - NX / 3.0) * (i - NX / 3.0)) / 200.0);
    for (int t = 0; t < steps; t++) {
        for (int j = 0; j < NY; j++)
            for (int i = 0; i < NX; i++) {
                double lap = field[(j + 1) % NY][i] + field[(j + NY - 1) % NY][i] + field[j][(i + 1) % NX] +
                             field[j][(i + NX - 1) % NX] - 4 * field[j][i];
                next[j][i] = field[j][i] + 0.2 * lap;
            }
        memcpy(field, next, sizeof field);
        for (int j = 0; j < NY; j++)
            for (int i = 0; i < NX; i++) out[j][i] = (float)field[j][i];
        double hours = 6.0 * t;
        check(strata_append(w, "time", (const uint8_t *)&hours, sizeof hours), "append time");
        check(strata_append(w, "temp", (const uint8_t *)out, sizeof out), "append temp");
    }
    uint64_t version = 0;
    check(strata_commit(w, &version), "commit");

    StrataReader *r = NULL;
    check(strata_open(path, &r), "open");
    size_t ndims = 0;
    uint64_t shape[8];
    check(strata_inq_var(r, "temp", &ndims, shape, 8), "inq_var");
    uint64_t start[3] = {(uint64_t)steps - 1, 0, 0}, count[3] = {1, NY, NX};
    static float back[NY][NX];
    check(strata_read(r, "temp", 3, start, count, (uint8_t *)back, sizeof back), "read");
    int same = memcmp(back, out, sizeof out) == 0;
    uint64_t hot = 0;
    check(strata_query_count(r, "temp > 290", &hot), "query");
    /* A wrong call is an error code and a message, not a crash. */
    StrataStatus bad = strata_read(r, "nope", 3, start, count, (uint8_t *)back, sizeof back);
    strata_close(r);
    printf("version %llu shape %llux%llux%llu last step read back %s, %llu cells > 290 K\n",
           (unsigned long long)version, (unsigned long long)shape[0], (unsigned long long)shape[1],
           (unsigned long long)shape[2], same ? "equal" : "DIFFERENT", (unsigned long long)hot);
    printf("reading a missing variable: status %d: %s\n", (int)bad, strata_last_error());
    return same ? 0 : 1;
}
