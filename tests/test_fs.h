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

/* A small training corpus at path: 400 lines of pangram text (tests that train a few steps). */
static inline void test_write_corpus(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return; /* the test's data_load then names the path */
    for (int i = 0; i < 400; i++)
        fprintf(f, "line %d: the quick brown fox jumps over the lazy dog.\n", i);
    fclose(f);
}

#endif
