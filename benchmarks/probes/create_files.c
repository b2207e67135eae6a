/* The file-creation floor in C (benchmarks/adversarial.py, ``floor_c_us``): creates argv[1]
 * new files of argv[2] zero bytes each, named as pieces are, in the new folder argv[3]
 * (openat on the folder's descriptor, O_CREAT | O_EXCL, one write, close: what
 * ``_native.small_pieces`` does per piece, with no Python around it), and prints the CPU
 * seconds (user and system) that took. What is left is the kernel's work per file. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static double cpu_seconds(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec
        + 1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s COUNT SIZE FOLDER\n", argv[0]);
        return 2;
    }
    long count = atol(argv[1]), size = atol(argv[2]);
    if (mkdir(argv[3], 0755) != 0) {
        perror(argv[3]);
        return 1;
    }
    int folder = open(argv[3], O_RDONLY | O_DIRECTORY);
    char *data = calloc(size > 0 ? size : 1, 1);
    if (folder < 0 || data == NULL) {
        perror(argv[3]);
        return 1;
    }
    char name[64];
    double before = cpu_seconds();
    for (long i = 0; i < count; i++) {
        snprintf(name, sizeof name, "iteration_%05ld.json.gz", i);
        int fd = openat(folder, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 || write(fd, data, size) != size || close(fd) != 0) {
            perror(name);
            return 1;
        }
    }
    printf("%.6f\n", cpu_seconds() - before);
    return 0;
}
