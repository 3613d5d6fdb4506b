/* MPI ranks writing one strata store, each its block of longitudes, through the C API.
 *
 *   mpicc mpi_blocks.c -I crates/strata-capi/include -L $TARGET/release -lstrata -o mpi_blocks
 *   mpirun -n 2 ./mpi_blocks out.strata [dense|hybrid]
 *
 * Each rank compresses its own block; per slab the ranks send rank 0 their segment tables
 * (MPI_Gatherv: offsets and sizes, not data), rank 0 answers where each segment goes
 * (MPI_Scatterv), every rank writes its bytes there, and rank 0 commits once. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "strata.h"

#define STEPS 30
#define NY 64
#define NX 128

static void check(StrataStatus s, const char *what) {
    if (s != STRATA_STATUS_OK) {
        fprintf(stderr, "%s failed (status %d): %s\n", what, (int)s, strata_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* One slab: tables to rank 0, placements back, bytes written. Returns 0 when no rank had
 * a slab to send. */
static int exchange(StrataWriter *w, int last, int rank, int size) {
    uint8_t *table = NULL;
    size_t len = 0;
    check(strata_part_encode(w, last, &table, &len), "part_encode");
    int has = table != NULL, any = 0;
    MPI_Allreduce(&has, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (!any) return 0;
    int mine = (int)len, *lens = NULL, *displs = NULL;
    uint8_t *all = NULL;
    if (rank == 0) {
        lens = malloc(size * sizeof *lens);
        displs = malloc(size * sizeof *displs);
    }
    MPI_Gather(&mine, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        int total = 0;
        for (int i = 0; i < size; i++) displs[i] = total, total += lens[i];
        all = malloc(total ? total : 1);
    }
    MPI_Gatherv(table, mine, MPI_BYTE, all, lens, displs, MPI_BYTE, 0, MPI_COMM_WORLD);
    strata_free_bytes(table, len);

    uint8_t **placements = NULL;
    size_t *plens = NULL;
    int *pl = NULL, *pd = NULL;
    uint8_t *packed = NULL;
    if (rank == 0) {
        const uint8_t **tables = malloc(size * sizeof *tables);
        size_t *tlens = malloc(size * sizeof *tlens);
        for (int i = 0; i < size; i++) tables[i] = all + displs[i], tlens[i] = (size_t)lens[i];
        placements = malloc(size * sizeof *placements);
        plens = malloc(size * sizeof *plens);
        check(strata_coordinator_place(w, size, tables, tlens, placements, plens), "coordinator_place");
        pl = malloc(size * sizeof *pl);
        pd = malloc(size * sizeof *pd);
        int total = 0;
        for (int i = 0; i < size; i++) pd[i] = total, pl[i] = (int)plens[i], total += pl[i];
        packed = malloc(total);
        for (int i = 0; i < size; i++) {
            for (int k = 0; k < pl[i]; k++) packed[pd[i] + k] = placements[i][k];
            strata_free_bytes(placements[i], plens[i]);
        }
        free(tables), free(tlens), free(placements), free(plens), free(all), free(lens), free(displs);
    }
    int plen = 0;
    MPI_Scatter(pl, 1, MPI_INT, &plen, 1, MPI_INT, 0, MPI_COMM_WORLD);
    uint8_t *placement = malloc(plen ? plen : 1);
    MPI_Scatterv(packed, pl, pd, MPI_BYTE, placement, plen, MPI_BYTE, 0, MPI_COMM_WORLD);
    check(strata_part_write(w, placement, (size_t)plen), "part_write");
    free(placement), free(packed), free(pl), free(pd);
    return 1;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || NX % size) {
        if (rank == 0) fprintf(stderr, "usage: mpirun -n N %s OUT.strata [PLACEMENT] (N divides %d)\n", argv[0], NX);
        MPI_Finalize();
        return 2;
    }
    const char *placement = argc > 2 ? argv[2] : "dense";
    int x0 = NX / size * rank, x1 = NX / size * (rank + 1);

    /* Every writer's block, as JSON. */
    char blocks[4096];
    int at = snprintf(blocks, sizeof blocks, "[");
    for (int r = 0; r < size; r++)
        at += snprintf(blocks + at, sizeof blocks - at, "%s{\"x\": [%d, %d]}", r ? ", " : "", NX / size * r,
                       NX / size * (r + 1));
    snprintf(blocks + at, sizeof blocks - at, "]");

    StrataWriter *w = NULL;
    check(strata_create(argv[1], "slab_records = 8\n", &w), "create");
    check(strata_def_dim(w, "t", 0), "def_dim");
    check(strata_def_dim(w, "y", NY), "def_dim");
    check(strata_def_dim(w, "x", NX), "def_dim");
    const char *xd[] = {"x"}, *fd[] = {"t", "y", "x"};
    check(strata_def_var(w, "x", STRATA_TYPE_F64, 1, xd), "def_var");
    check(strata_def_var(w, "field", STRATA_TYPE_F32, 3, fd), "def_var");
    check(strata_put_att_text(w, NULL, "title", "written by MPI ranks in C"), "put_att");

    char token[128] = {0};
    if (rank == 0) {
        check(strata_coordinate(w, placement, blocks, (uint32_t)size), "coordinate");
        check(strata_token(w, token, sizeof token), "token");
    }
    MPI_Bcast(token, sizeof token, MPI_CHAR, 0, MPI_COMM_WORLD);
    check(strata_part(w, token, placement, blocks, (uint32_t)rank, 0), "part");

    double xs[NX];
    for (int i = x0; i < x1; i++) xs[i - x0] = 0.5 * i;
    check(strata_write(w, "x", (const uint8_t *)xs, sizeof(double) * (x1 - x0)), "write x");
    exchange(w, 0, rank, size); /* the fixed variables' slab */

    float *block = malloc(sizeof(float) * NY * (x1 - x0));
    for (int t = 0; t < STEPS; t++) {
        for (int j = 0; j < NY; j++)
            for (int i = x0; i < x1; i++) block[j * (x1 - x0) + (i - x0)] = (float)((t * 31 + j * 7 + i) % 101) * 0.25f;
        check(strata_append(w, "field", (const uint8_t *)block, sizeof(float) * NY * (x1 - x0)), "append");
        int ready = 0;
        check(strata_part_ready(w, &ready), "ready");
        if (ready) exchange(w, 0, rank, size);
    }
    while (exchange(w, 1, rank, size)) {
    }
    free(block);
    MPI_Barrier(MPI_COMM_WORLD); /* every rank has written: rank 0 may commit */
    uint64_t version = 0;
    check(strata_commit(w, &version), "commit");
    if (rank == 0) printf("committed version %llu with %d ranks (%s)\n", (unsigned long long)version, size, placement);
    MPI_Finalize();
    return 0;
}
