/* Implements: file-system helpers the runtime tests share. */
#ifndef RT_TEST_FS_H
#define RT_TEST_FS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* rm -r (a checkpoint directory: the manifest, step directories and their shards). */
static inline void test_remove_tree(const char *path)
{
    DIR *d = opendir(path);
    if (!d) {
        remove(path);
        return;
    }
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            snprintf(p, sizeof p, "%s/%s", path, e->d_name) < (int)sizeof p)
            test_remove_tree(p);
    closedir(d);
    rmdir(path);
}

#endif
