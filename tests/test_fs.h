/* Implements: file-system helpers the tests share (included by relative path). */
#ifndef RT_TEST_FS_H
#define RT_TEST_FS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* rm -r (a checkpoint directory, a test's scratch directory). */
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
