/* fsobserve: what an agent process asked the kernel to do to its trial folder.
 *
 * Loaded with LD_PRELOAD into every life of a power-loss trial. Active only while
 * HARNESS_FS_TRACE (the trace folder) and HARNESS_FS_ROOT (the trial folder, a real
 * path) are set; it reads them lazily, and again in a forked child (the fork server's
 * children get their environment through os.environ after the fork). It tracks
 * descriptor -> real path for files under the root (a path spelled through a symlink or
 * /proc/self/cwd is resolved to its real path first) and appends one line per call
 * that changes a name or makes something durable to the trace file (opened O_APPEND,
 * one write(2) a line, so lines of threads and processes never interleave):
 *
 *   create|trunc PID SIZE MTIME \t PATH     mkdir|rmdir|unlink|dirfsync|mmap|overflow PID \t PATH
 *   rename|link PID \t FROM \t TO           rangesync PID \t PATH
 *   write PID OFFSET LENGTH SIZE MTIME \t PATH
 *   ftruncate PID LENGTH SIZE MTIME \t PATH
 *   fsync PID IMAGE SIZE MTIME \t PATH      sync PID
 *
 * SIZE and MTIME (nanoseconds) are the file's size and modification time just after the
 * call: at a cut, a file that differs from them was changed by a call not seen here.
 *
 * An fsync or fdatasync of a file first copies the file's content to the image file
 * IMAGE in the trace folder (the file's durable content is IMAGE's first SIZE bytes),
 * then calls the real one, and writes its line only when that returned 0: exactly the
 * writes that completed before the program asked are durable. A write through a
 * descriptor opened O_SYNC or O_DSYNC (or pwritev2 with RWF_SYNC or RWF_DSYNC) is a write
 * and an fsync. sync_file_range makes nothing durable (it neither writes the file's size
 * nor flushes the drive's cache): its line says it was called, nothing more. A file that
 * only grew since this process's last image of it (no write, truncation or O_TRUNC below
 * that image's size: an append-only journal) has its new bytes appended to that image
 * instead of a whole copy, so that a journal's images cost its size, not its size times
 * its fsyncs; an earlier line's SIZE still names its own prefix. Its own files are
 * written through the real functions, never traced.
 *
 * Writes are seen through write, pwrite, writev, pwritev, pwritev2, copy_file_range,
 * sendfile, splice, fallocate and posix_fallocate; C stdio through fopen, fwrite, fputs,
 * fflush and fclose (the flushes glibc makes inside other calls, exit's among them, are
 * not seen). A program started by exec inherits the library through its environment and
 * learns at its first call which of its inherited descriptors name watched files (from
 * /proc/self/fd). The world's database (world.db*) is never tracked. Not seen: direct
 * system calls, io_uring, writes through a shared mapping (reported as an mmap line),
 * static binaries; the cut's check of each file against its last line finds what they
 * changed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define MAX_FDS 1024
#define MAX_PATH 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t active_pid;  /* the process the settings below were read in; 0: not active */
static char root[MAX_PATH];
static size_t root_len;
static char trace_dir[MAX_PATH];
static int trace_fd = -1;
static unsigned long image_seq;
static char paths[MAX_FDS][MAX_PATH]; /* "" for a descriptor not tracked */
static char world[MAX_FDS];           /* 1 for a descriptor of the world's database */
static char osync[MAX_FDS];           /* 1 for a tracked descriptor opened O_SYNC/O_DSYNC */
static __thread int world_synced;     /* this thread's last sync was the world's */
static int high_fd;                   /* one past the highest tracked descriptor */

/* This process's last image of each file it fsynced, by inode: what a later fsync of a
 * file that only grew may extend. `dirty`: written or truncated below `size` since. */
#define MAX_IMAGES 64
struct image_of { dev_t dev; ino_t ino; unsigned long seq; off_t size; int dirty, used; };
static struct image_of images[MAX_IMAGES];
static int image_next; /* the slot reused when all are taken (round robin) */

#define REAL(ret, name, ...)                                        \
    static ret (*real_##name)(__VA_ARGS__);                         \
    static void resolve_##name(void) {                              \
        if (!real_##name) *(void **)&real_##name = dlsym(RTLD_NEXT, #name); \
    }

REAL(int, open, const char *, int, ...)
REAL(int, open64, const char *, int, ...)
REAL(int, openat, int, const char *, int, ...)
REAL(int, openat64, int, const char *, int, ...)
REAL(int, close, int)
REAL(int, dup, int)
REAL(int, dup2, int, int)
REAL(int, dup3, int, int, int)
REAL(int, fcntl, int, int, ...)
REAL(int, fcntl64, int, int, ...)
REAL(ssize_t, write, int, const void *, size_t)
REAL(ssize_t, pwrite, int, const void *, size_t, off_t)
REAL(ssize_t, pwrite64, int, const void *, size_t, off64_t)
REAL(ssize_t, writev, int, const struct iovec *, int)
REAL(ssize_t, pwritev, int, const struct iovec *, int, off_t)
REAL(ssize_t, pwritev64, int, const struct iovec *, int, off64_t)
REAL(int, fsync, int)
REAL(int, fdatasync, int)
REAL(int, sync_file_range, int, off64_t, off64_t, unsigned int)
REAL(void, sync, void)
REAL(int, syncfs, int)
REAL(int, ftruncate, int, off_t)
REAL(int, ftruncate64, int, off64_t)
REAL(int, truncate, const char *, off_t)
REAL(int, truncate64, const char *, off64_t)
REAL(int, mkdir, const char *, mode_t)
REAL(int, mkdirat, int, const char *, mode_t)
REAL(int, rmdir, const char *)
REAL(int, unlink, const char *)
REAL(int, unlinkat, int, const char *, int)
REAL(int, rename, const char *, const char *)
REAL(int, renameat, int, const char *, int, const char *)
REAL(int, renameat2, int, const char *, int, const char *, unsigned int)
REAL(int, link, const char *, const char *)
REAL(int, linkat, int, const char *, int, const char *, int)
REAL(void *, mmap, void *, size_t, int, int, int, off_t)
REAL(void *, mmap64, void *, size_t, int, int, int, off64_t)
REAL(ssize_t, pwritev2, int, const struct iovec *, int, off_t, int)
REAL(ssize_t, pwritev64v2, int, const struct iovec *, int, off64_t, int)
REAL(ssize_t, copy_file_range, int, off64_t *, int, off64_t *, size_t, unsigned int)
REAL(ssize_t, sendfile, int, int, off_t *, size_t)
REAL(ssize_t, sendfile64, int, int, off64_t *, size_t)
REAL(ssize_t, splice, int, off64_t *, int, off64_t *, size_t, unsigned int)
REAL(int, fallocate, int, int, off_t, off_t)
REAL(int, fallocate64, int, int, off64_t, off64_t)
REAL(int, posix_fallocate, int, off_t, off_t)
REAL(int, posix_fallocate64, int, off64_t, off64_t)
REAL(FILE *, fopen, const char *, const char *)
REAL(FILE *, fopen64, const char *, const char *)
REAL(size_t, fwrite, const void *, size_t, size_t, FILE *)
REAL(int, fputs, const char *, FILE *)
REAL(int, fflush, FILE *)
REAL(int, fclose, FILE *)
REAL(int, mkstemp, char *)
REAL(int, mkstemp64, char *)
REAL(int, mkostemp, char *, int)
REAL(int, mkostemp64, char *, int)

/* Raw system calls for the library's own files: never traced, never recursing. */
static int raw_open(const char *path, int flags, mode_t mode) {
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, mode);
}
static ssize_t raw_write(int fd, const void *buf, size_t len) {
    return (ssize_t)syscall(SYS_write, fd, buf, len);
}
static int raw_close(int fd) { return (int)syscall(SYS_close, fd); }

/* After a real fork (atfork runs): the child keeps the descriptor table it inherited and
 * reads its settings again (the fork server's child sets them after it starts). */
static void forked_child(void) {
    pthread_mutex_init(&lock, NULL);
    if (active_pid > 0) active_pid = -1;
}

__attribute__((constructor)) static void install_fork_handler(void) {
    pthread_atfork(NULL, NULL, forked_child);
}

static int watched(const char *abs);

/* The descriptors this process was given (a program started by exec keeps its parent's
 * open files, and this library's table starts empty in it): each that names a watched
 * file is tracked from here on. Under lock. */
static void relearn(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return;
    int own = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (*end || end == e->d_name || fd < 0 || fd >= MAX_FDS || fd == own || fd == trace_fd)
            continue;
        char link[64], target[MAX_PATH];
        snprintf(link, sizeof link, "/proc/self/fd/%ld", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        if (target[0] != '/' || strstr(target, " (deleted)") || !watched(target)) continue;
        strcpy(paths[fd], target);
        int flags = (int)syscall(SYS_fcntl, (int)fd, F_GETFL);
        osync[fd] = flags >= 0 && (flags & O_DSYNC);
        if (fd >= high_fd) high_fd = (int)fd + 1;
    }
    closedir(d);
}

/* Whether this process observes: reads the settings once per process while they are set,
 * and again while they are not (a forked child sets them after its first calls). A child
 * made by vfork (Python's subprocess) shares its parent's memory until it execs, and no
 * atfork handler runs in it: it sees another process's pid here and must touch nothing. */
static int active(void) {
    pid_t pid = getpid();
    if (active_pid == pid) return trace_fd >= 0;
    if (active_pid > 0) return 0; /* a vfork child: the state is its parent's */
    const char *t = getenv("HARNESS_FS_TRACE");
    const char *r = getenv("HARNESS_FS_ROOT");
    if (!t || !r || !*t || !*r || strlen(t) + 16 >= MAX_PATH || strlen(r) + 2 >= MAX_PATH)
        return 0;
    pthread_mutex_lock(&lock);
    if (active_pid <= 0) {
        int same = active_pid == -1 && trace_fd >= 0 && strcmp(trace_dir, t) == 0 &&
                   strcmp(root, r) == 0;
        if (!same) {
            if (trace_fd >= 0) raw_close(trace_fd);
            for (int i = 0; i < high_fd; i++) paths[i][0] = osync[i] = 0; /* another trial's */
            high_fd = 0;
            strcpy(trace_dir, t);
            strcpy(root, r);
            root_len = strlen(root);
            while (root_len > 1 && root[root_len - 1] == '/') root[--root_len] = 0;
            char file[MAX_PATH];
            snprintf(file, sizeof file, "%s/trace", trace_dir);
            trace_fd = raw_open(file, O_WRONLY | O_APPEND | O_CREAT, 0600);
            if (trace_fd >= 0) relearn();
        }
        image_seq = 0;
        memset(images, 0, sizeof images); /* another process's images are not this one's */
        image_next = 0;
        active_pid = pid;
    }
    pthread_mutex_unlock(&lock);
    return trace_fd >= 0;
}

static void emit(const char *fmt, ...) {
    char line[3 * MAX_PATH + 128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof line - 1) n = sizeof line - 2;
    line[n++] = '\n';
    raw_write(trace_fd, line, (size_t)n);
    world_synced = 0;
}

/* "/a/./b//c/../d" -> "/a/b/d", in place. */
static void normalize(char *p) {
    char out[MAX_PATH];
    size_t o = 0;
    const char *s = p;
    while (*s) {
        while (*s == '/') s++;
        if (!*s) break;
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 1 && s[0] == '.') {
        } else if (n == 2 && s[0] == '.' && s[1] == '.') {
            while (o > 0 && out[o - 1] != '/') o--;
            if (o > 0) o--;
        } else if (o + n + 2 < MAX_PATH) {
            out[o++] = '/';
            memcpy(out + o, s, n);
            o += n;
        }
        s += n;
    }
    if (o == 0) out[o++] = '/';
    out[o] = 0;
    strcpy(p, out);
}

static int under_root(const char *abs);

/* The real path of `spelled` (absolute, as the program spelled it) in out: the whole
 * path's when `follow` and it exists, else its folder's real path and its last name as
 * given (a name being made, or one whose symlink the call acts on); 0 if neither. */
static int real_spelling(const char *spelled, char *out, int follow) {
    char found[PATH_MAX];
    if (follow && realpath(spelled, found) && strlen(found) < MAX_PATH) {
        strcpy(out, found);
        return 1;
    }
    const char *slash = strrchr(spelled, '/');
    if (!slash || slash == spelled) return 0;
    const char *name = slash + 1;
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        if (!realpath(spelled, found) || strlen(found) >= MAX_PATH) return 0;
        strcpy(out, found);
        return 1;
    }
    char folder[MAX_PATH];
    size_t n = (size_t)(slash - spelled);
    memcpy(folder, spelled, n);
    folder[n] = 0;
    if (!realpath(folder, found)) return 0;
    size_t base = strcmp(found, "/") == 0 ? 0 : strlen(found), len = strlen(name);
    if (base + len + 2 >= MAX_PATH) return 0;
    memcpy(out, found, base);
    out[base] = '/';
    memcpy(out + base + 1, name, len + 1);
    return 1;
}

/* The absolute path of `path` relative to `dirfd`, in out; 0 if it cannot be told. A path
 * outside the root as spelled is resolved to its real path (a symlink, /proc/self/cwd):
 * any spelling of a watched file is watched. */
static int absolute(int dirfd, const char *path, char *out, int follow) {
    if (!path) return 0;
    char spelled[MAX_PATH];
    if (path[0] == '/') {
        if (strlen(path) >= MAX_PATH) return 0;
        strcpy(spelled, path);
    } else {
        char base[MAX_PATH];
        if (dirfd == AT_FDCWD) {
            if (!getcwd(base, sizeof base)) return 0;
        } else if (dirfd >= 0 && dirfd < MAX_FDS && paths[dirfd][0]) {
            strcpy(base, paths[dirfd]);
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = readlink(link, base, sizeof base - 1);
            if (n <= 0) return 0;
            base[n] = 0;
        }
        char joined[2 * MAX_PATH + 2];
        snprintf(joined, sizeof joined, "%s/%s", base, path);
        if (strlen(joined) >= MAX_PATH) return 0;
        strcpy(spelled, joined);
    }
    strcpy(out, spelled);
    normalize(out);
    if (!under_root(out)) {
        char real[MAX_PATH];
        if (real_spelling(spelled, real, follow)) {
            normalize(real);
            if (under_root(real)) strcpy(out, real);
        }
    }
    return 1;
}

static int under_root(const char *abs) {
    if (!root_len) return 0;
    return strncmp(abs, root, root_len) == 0 && (abs[root_len] == '/' || abs[root_len] == 0);
}

static int is_world(const char *abs) {
    const char *name = strrchr(abs, '/');
    return name && strncmp(name + 1, "world.db", 8) == 0;
}

/* Whether an absolute path lies under the root and is not the world's database. */
static int watched(const char *abs) { return under_root(abs) && !is_world(abs); }

/* The watched absolute path of (dirfd, path) in out, or 0 (`follow`: a symlink as the
 * last name is followed, as open and truncate do). */
static int resolve_watched(int dirfd, const char *path, char *out, int follow) {
    out[0] = 0;
    if (!active()) return 0;
    return absolute(dirfd, path, out, follow) && watched(out);
}

static void track(int fd, const char *abs) {
    if (fd < 0) return;
    if (fd >= MAX_FDS) {
        emit("overflow %d\t%s", getpid(), abs);
        return;
    }
    pthread_mutex_lock(&lock);
    strcpy(paths[fd], abs);
    if (fd >= high_fd) high_fd = fd + 1;
    pthread_mutex_unlock(&lock);
}

static void untrack(int fd) {
    if (fd >= 0 && fd < MAX_FDS && paths[fd][0]) {
        pthread_mutex_lock(&lock);
        paths[fd][0] = 0;
        pthread_mutex_unlock(&lock);
    }
}

/* The tracked path of fd copied to out, or 0. */
static int tracked(int fd, char *out) {
    if (fd < 0 || fd >= MAX_FDS || !active() || !paths[fd][0]) return 0;
    pthread_mutex_lock(&lock);
    strcpy(out, paths[fd]);
    pthread_mutex_unlock(&lock);
    return out[0] != 0;
}

/* Whether fd is a descriptor this process tracks (checked before active(): cheap). */
static int fd_watched(int fd) {
    return fd >= 0 && fd < MAX_FDS && paths[fd][0] && active();
}

/* A change and its line are one step for the harness's timed kill (SIGALRM at its default
 * action, from a timer the agent arms): a kill landing between them would leave a change
 * the trace does not hold, which the cut's check would take for one the library did not
 * see. So signals wait while a watched file changes and its line is written (SIGKILL
 * cannot wait: the supervisor sends it only at failpoints, where nothing is written). */
static __thread int holding;
static __thread sigset_t held_mask;
static void hold(int watch) {
    if (!watch || holding++) return;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &held_mask);
}
static void release(int watch) {
    if (!watch || --holding) return;
    pthread_sigmask(SIG_SETMASK, &held_mask, NULL);
}

static void copy_fd(int from, int to) {
    char p[MAX_PATH];
    if (tracked(from, p)) {
        track(to, p);
        if (to >= 0 && to < MAX_FDS && from >= 0 && from < MAX_FDS) osync[to] = osync[from];
    } else {
        untrack(to);
    }
}

/* A rename moves the paths of open descriptors with it (a file, or a folder's files). */
static void renamed(const char *from, const char *to) {
    size_t n = strlen(from);
    pthread_mutex_lock(&lock);
    for (int i = 0; i < high_fd; i++) {
        if (strncmp(paths[i], from, n) == 0 && (paths[i][n] == 0 || paths[i][n] == '/')) {
            char moved[2 * MAX_PATH];
            snprintf(moved, sizeof moved, "%s%s", to, paths[i] + n);
            if (strlen(moved) < MAX_PATH) strcpy(paths[i], moved);
        }
    }
    pthread_mutex_unlock(&lock);
}

static struct image_of *image_for(dev_t dev, ino_t ino) { /* under lock */
    for (int i = 0; i < MAX_IMAGES; i++)
        if (images[i].used && images[i].dev == dev && images[i].ino == ino) return &images[i];
    return NULL;
}

/* A change below `offset` of the file behind st: its image can no longer be extended. */
static void changed_below(const struct stat *st, long long offset) {
    pthread_mutex_lock(&lock);
    struct image_of *img = image_for(st->st_dev, st->st_ino);
    if (img && offset < (long long)img->size) img->dirty = 1;
    pthread_mutex_unlock(&lock);
}

static void forget_image(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0) return;
    pthread_mutex_lock(&lock);
    struct image_of *img = image_for(st.st_dev, st.st_ino);
    if (img) img->used = 0;
    pthread_mutex_unlock(&lock);
}

/* The file's size and modification time (ns) after a change, as " SIZE MTIME". */
static void stat_words(const struct stat *st, char *out, size_t len) {
    snprintf(out, len, " %lld %lld", (long long)st->st_size,
             (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec);
}

/* A file opened under the root: its create or truncation line, if the open made either. */
static void made(int fd, const char *abs, int existed, int truncating) {
    if (existed && !truncating) return;
    struct stat st;
    char words[64] = "";
    if (fstat(fd, &st) == 0) stat_words(&st, words, sizeof words);
    if (!existed) {
        forget_image(fd); /* a new file: an image of an old one with its inode is not its */
        emit("create %d%s\t%s", getpid(), words, abs);
    } else {
        if (words[0]) changed_below(&st, 0);
        emit("trunc %d%s\t%s", getpid(), words, abs);
    }
}

/* -- opening and closing ------------------------------------------------------------ */

static int opened(int (*real)(int, const char *, int, ...), int dirfd, const char *path,
                  int flags, mode_t mode) {
    char abs[MAX_PATH];
    if (!resolve_watched(dirfd, path, abs, !(flags & O_NOFOLLOW))) {
        int fd = real(dirfd, path, flags, mode);
        /* The world's own descriptors are remembered only to tell its syncs (below). */
        if (fd >= 0 && fd < MAX_FDS && trace_fd >= 0 && active_pid == getpid())
            world[fd] = under_root(abs) && is_world(abs);
        return fd;
    }
    struct stat before;
    int existed = (flags & O_CREAT) ? lstat(abs, &before) == 0 : 1;
    int truncating = (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY;
    int changes = !existed || truncating;
    hold(changes);
    int fd = real(dirfd, path, flags, mode);
    int saved = errno;
    if (fd >= 0) {
        track(fd, abs);
        if (fd < MAX_FDS) osync[fd] = (flags & O_DSYNC) != 0; /* O_SYNC holds O_DSYNC's bit */
        made(fd, abs, existed, truncating);
    }
    release(changes);
    errno = saved;
    return fd;
}

static int via_open(int dirfd, const char *path, int flags, ...) {
    (void)dirfd;
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (mode_t)va_arg(ap, int);
    va_end(ap);
    resolve_open();
    return real_open(path, flags, mode);
}
static int via_open64(int dirfd, const char *path, int flags, ...) {
    (void)dirfd;
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (mode_t)va_arg(ap, int);
    va_end(ap);
    resolve_open64();
    return real_open64(path, flags, mode);
}
static int via_openat(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (mode_t)va_arg(ap, int);
    va_end(ap);
    resolve_openat();
    return real_openat(dirfd, path, flags, mode);
}
static int via_openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (mode_t)va_arg(ap, int);
    va_end(ap);
    resolve_openat64();
    return real_openat64(dirfd, path, flags, mode);
}

static mode_t mode_arg(int flags, va_list ap) {
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return opened(via_open, AT_FDCWD, path, flags, mode);
}
int open64(const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return opened(via_open64, AT_FDCWD, path, flags, mode);
}
int openat(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return opened(via_openat, dirfd, path, flags, mode);
}
int openat64(int dirfd, const char *path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return opened(via_openat64, dirfd, path, flags, mode);
}
int __open_2(const char *path, int flags) { return opened(via_open, AT_FDCWD, path, flags, 0); }
int __open64_2(const char *path, int flags) {
    return opened(via_open64, AT_FDCWD, path, flags, 0);
}
int __openat_2(int dirfd, const char *path, int flags) {
    return opened(via_openat, dirfd, path, flags, 0);
}
int __openat64_2(int dirfd, const char *path, int flags) {
    return opened(via_openat64, dirfd, path, flags, 0);
}
int creat(const char *path, mode_t mode) {
    return opened(via_open, AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}
int creat64(const char *path, mode_t mode) {
    return opened(via_open64, AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

int close(int fd) {
    resolve_close();
    /* A vfork child closing descriptors before it execs must not untrack its parent's. */
    if (active_pid <= 0 || active_pid == getpid()) {
        untrack(fd);
        if (fd >= 0 && fd < MAX_FDS) world[fd] = osync[fd] = 0;
    }
    return real_close(fd);
}

int dup(int fd) {
    resolve_dup();
    int got = real_dup(fd);
    if (got >= 0 && active()) copy_fd(fd, got);
    return got;
}
int dup2(int fd, int to) {
    resolve_dup2();
    int got = real_dup2(fd, to);
    if (got >= 0 && active() && fd != to) copy_fd(fd, got);
    return got;
}
int dup3(int fd, int to, int flags) {
    resolve_dup3();
    int got = real_dup3(fd, to, flags);
    if (got >= 0 && active()) copy_fd(fd, got);
    return got;
}

static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, va_list ap) {
    switch (cmd) {
    /* Commands whose third argument is a pointer. */
    case F_GETLK: case F_SETLK: case F_SETLKW: case F_OFD_GETLK: case F_OFD_SETLK:
    case F_OFD_SETLKW: case F_GETOWN_EX: case F_SETOWN_EX:
        return real(fd, cmd, va_arg(ap, void *));
    default: {
        long arg = va_arg(ap, long);
        int got = real(fd, cmd, arg);
        if (got >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && active()) copy_fd(fd, got);
        return got;
    }
    }
}
int fcntl(int fd, int cmd, ...) {
    resolve_fcntl();
    va_list ap;
    va_start(ap, cmd);
    int got = fcntl_common(real_fcntl, fd, cmd, ap);
    va_end(ap);
    return got;
}
int fcntl64(int fd, int cmd, ...) {
    resolve_fcntl64();
    if (!real_fcntl64) resolve_fcntl(), real_fcntl64 = real_fcntl;
    va_list ap;
    va_start(ap, cmd);
    int got = fcntl_common(real_fcntl64, fd, cmd, ap);
    va_end(ap);
    return got;
}

/* -- writing -------------------------------------------------------------------------- */

static void durable_now(int fd, const char *path);

/* A write of n bytes at offset through fd: its line, with the file's size and time after
 * it; then, through an O_SYNC/O_DSYNC descriptor or with `sync`, the fsync it also is. */
static void wrote_sync(int fd, long long offset, ssize_t n, int sync) {
    char p[MAX_PATH];
    if (n > 0 && tracked(fd, p)) {
        struct stat st;
        char words[64] = "";
        if (fstat(fd, &st) == 0) {
            changed_below(&st, offset);
            stat_words(&st, words, sizeof words);
        }
        emit("write %d %lld %zd%s\t%s", getpid(), offset, n, words, p);
        if (sync || osync[fd]) durable_now(fd, p);
    }
}

static void wrote(int fd, long long offset, ssize_t n) { wrote_sync(fd, offset, n, 0); }

/* Where a write at the descriptor's own position began: its position now less n. */
static long long began(int fd, ssize_t n) {
    if (n <= 0 || fd < 0 || fd >= MAX_FDS || !paths[fd][0]) return 0;
    return (long long)lseek(fd, 0, SEEK_CUR) - n;
}

ssize_t write(int fd, const void *buf, size_t len) {
    resolve_write();
    int w = fd_watched(fd);
    hold(w);
    ssize_t n = real_write(fd, buf, len);
    int saved = errno;
    wrote(fd, began(fd, n), n);
    release(w);
    errno = saved;
    return n;
}
ssize_t pwrite(int fd, const void *buf, size_t len, off_t at) {
    resolve_pwrite();
    int w = fd_watched(fd);
    hold(w);
    ssize_t n = real_pwrite(fd, buf, len, at);
    int saved = errno;
    wrote(fd, at, n);
    release(w);
    errno = saved;
    return n;
}
ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t at) {
    resolve_pwrite64();
    int w = fd_watched(fd);
    hold(w);
    ssize_t n = real_pwrite64(fd, buf, len, at);
    int saved = errno;
    wrote(fd, at, n);
    release(w);
    errno = saved;
    return n;
}
ssize_t writev(int fd, const struct iovec *iov, int count) {
    resolve_writev();
    int w = fd_watched(fd);
    hold(w);
    ssize_t n = real_writev(fd, iov, count);
    int saved = errno;
    wrote(fd, began(fd, n), n);
    release(w);
    errno = saved;
    return n;
}
ssize_t pwritev(int fd, const struct iovec *iov, int count, off_t at) {
    resolve_pwritev();
    int w = fd_watched(fd);
    hold(w);
    ssize_t n = real_pwritev(fd, iov, count, at);
    int saved = errno;
    wrote(fd, at, n);
    release(w);
    errno = saved;
    return n;
}
ssize_t pwritev64(int fd, const struct iovec *iov, int count, off64_t at) {
    resolve_pwritev64();
    int w = fd_watched(fd);
    hold(w);
    ssize_t n = real_pwritev64(fd, iov, count, at);
    int saved = errno;
    wrote(fd, at, n);
    release(w);
    errno = saved;
    return n;
}

/* pwritev2's flags: RWF_DSYNC and RWF_SYNC make the write an fsync too; RWF_APPEND
 * writes at the end whatever the offset; an offset of -1 is the descriptor's position. */
#define FLAG_DSYNC 0x2
#define FLAG_SYNC 0x4
#define FLAG_APPEND 0x10
static ssize_t vectored2(ssize_t n, int fd, long long at, int flags) {
    int saved = errno;
    long long offset = at;
    if (n > 0 && (flags & FLAG_APPEND)) {
        struct stat st;
        offset = fstat(fd, &st) == 0 ? (long long)st.st_size - n : 0;
    } else if (n > 0 && at == -1) {
        offset = began(fd, n);
    }
    wrote_sync(fd, offset, n, (flags & (FLAG_DSYNC | FLAG_SYNC)) != 0);
    errno = saved;
    return n;
}
ssize_t pwritev2(int fd, const struct iovec *iov, int count, off_t at, int flags) {
    resolve_pwritev2();
    int w = fd_watched(fd);
    hold(w);
    ssize_t n = vectored2(real_pwritev2(fd, iov, count, at, flags), fd, at, flags);
    release(w);
    return n;
}
ssize_t pwritev64v2(int fd, const struct iovec *iov, int count, off64_t at, int flags) {
    resolve_pwritev64v2();
    int w = fd_watched(fd);
    hold(w);
    ssize_t n = vectored2(real_pwritev64v2(fd, iov, count, at, flags), fd, at, flags);
    release(w);
    return n;
}

/* A copy into `out` done in the kernel: at *out_at (its value before the call) when
 * given, else at the descriptor's position. */
static ssize_t copied(ssize_t n, int out, long long at) {
    int saved = errno;
    wrote(out, at >= 0 ? at : began(out, n), n);
    errno = saved;
    return n;
}
ssize_t copy_file_range(int in, off64_t *in_at, int out, off64_t *out_at, size_t len,
                        unsigned int flags) {
    resolve_copy_file_range();
    long long at = out_at ? (long long)*out_at : -1;
    int w = fd_watched(out);
    hold(w);
    ssize_t n = copied(real_copy_file_range(in, in_at, out, out_at, len, flags), out, at);
    release(w);
    return n;
}
ssize_t splice(int in, off64_t *in_at, int out, off64_t *out_at, size_t len, unsigned int flags) {
    resolve_splice();
    long long at = out_at ? (long long)*out_at : -1;
    int w = fd_watched(out);
    hold(w);
    ssize_t n = copied(real_splice(in, in_at, out, out_at, len, flags), out, at);
    release(w);
    return n;
}
ssize_t sendfile(int out, int in, off_t *in_at, size_t count) {
    resolve_sendfile();
    int w = fd_watched(out);
    hold(w);
    ssize_t n = copied(real_sendfile(out, in, in_at, count), out, -1);
    release(w);
    return n;
}
ssize_t sendfile64(int out, int in, off64_t *in_at, size_t count) {
    resolve_sendfile64();
    int w = fd_watched(out);
    hold(w);
    ssize_t n = copied(real_sendfile64(out, in, in_at, count), out, -1);
    release(w);
    return n;
}

/* Space allocated (or a hole punched, or a range zeroed): the range's bytes changed as a
 * write's would, and the size with them. */
static int allocated(int got, int fd, long long at, long long len) {
    int saved = errno;
    if (got == 0 && len > 0) wrote(fd, at, (ssize_t)len);
    errno = saved;
    return got;
}
int fallocate(int fd, int mode, off_t at, off_t len) {
    resolve_fallocate();
    int w = fd_watched(fd);
    hold(w);
    int got = allocated(real_fallocate(fd, mode, at, len), fd, at, len);
    release(w);
    return got;
}
int fallocate64(int fd, int mode, off64_t at, off64_t len) {
    resolve_fallocate64();
    int w = fd_watched(fd);
    hold(w);
    int got = allocated(real_fallocate64(fd, mode, at, len), fd, at, len);
    release(w);
    return got;
}
int posix_fallocate(int fd, off_t at, off_t len) { /* returns an error number, not -1 */
    resolve_posix_fallocate();
    int w = fd_watched(fd);
    hold(w);
    int got = allocated(real_posix_fallocate(fd, at, len), fd, at, len);
    release(w);
    return got;
}
int posix_fallocate64(int fd, off64_t at, off64_t len) {
    resolve_posix_fallocate64();
    int w = fd_watched(fd);
    hold(w);
    int got = allocated(real_posix_fallocate64(fd, at, len), fd, at, len);
    release(w);
    return got;
}

/* -- C stdio ------------------------------------------------------------------------- */

/* glibc's stdio writes through its own internal write, which no preload can replace: what
 * a call handed the kernel is told from the stream's buffer instead, the bytes buffered
 * before it plus those it took less those still buffered, ending at the descriptor's
 * position. */
static int watched_stream(FILE *fp) {
    if (!fp || !active()) return -1;
    int fd = fileno(fp);
    return fd >= 0 && fd < MAX_FDS && paths[fd][0] ? fd : -1;
}
static long long buffered(FILE *fp) {
    return fp->_IO_write_ptr > fp->_IO_write_base ? fp->_IO_write_ptr - fp->_IO_write_base : 0;
}
static void stream_wrote(FILE *fp, int fd, long long before, long long took) {
    int saved = errno;
    long long flushed = before + took - buffered(fp);
    if (flushed > 0) {
        long long end = lseek(fd, 0, SEEK_CUR);
        wrote(fd, end >= flushed ? end - flushed : 0, (ssize_t)flushed);
    }
    errno = saved;
}

static FILE *opened_stream(FILE *(*real)(const char *, const char *), const char *path,
                           const char *mode) {
    char abs[MAX_PATH];
    if (!path || !mode || !resolve_watched(AT_FDCWD, path, abs, 1)) return real(path, mode);
    struct stat before;
    int writing = mode[0] == 'w' || mode[0] == 'a';
    int existed = writing ? lstat(abs, &before) == 0 : 1;
    int changes = !existed || mode[0] == 'w';
    hold(changes);
    FILE *fp = real(path, mode);
    int saved = errno;
    if (fp) {
        int fd = fileno(fp);
        track(fd, abs);
        if (fd >= 0 && fd < MAX_FDS) osync[fd] = 0;
        made(fd, abs, existed, mode[0] == 'w');
    }
    release(changes);
    errno = saved;
    return fp;
}
FILE *fopen(const char *path, const char *mode) {
    resolve_fopen();
    return opened_stream(real_fopen, path, mode);
}
FILE *fopen64(const char *path, const char *mode) {
    resolve_fopen64();
    return opened_stream(real_fopen64, path, mode);
}
size_t fwrite(const void *data, size_t size, size_t count, FILE *fp) {
    resolve_fwrite();
    int fd = watched_stream(fp);
    long long before = fd >= 0 ? buffered(fp) : 0;
    hold(fd >= 0);
    size_t got = real_fwrite(data, size, count, fp);
    if (fd >= 0) stream_wrote(fp, fd, before, (long long)(got * size));
    release(fd >= 0);
    return got;
}
int fputs(const char *text, FILE *fp) {
    resolve_fputs();
    int fd = watched_stream(fp);
    long long before = fd >= 0 ? buffered(fp) : 0;
    hold(fd >= 0);
    int got = real_fputs(text, fp);
    if (fd >= 0) stream_wrote(fp, fd, before, got >= 0 ? (long long)strlen(text) : 0);
    release(fd >= 0);
    return got;
}
int fflush(FILE *fp) {
    resolve_fflush();
    int fd = watched_stream(fp); /* fflush(NULL) flushes every stream: not seen */
    long long before = fd >= 0 ? buffered(fp) : 0;
    hold(fd >= 0);
    int got = real_fflush(fp);
    if (fd >= 0) stream_wrote(fp, fd, before, 0);
    release(fd >= 0);
    return got;
}
int fclose(FILE *fp) {
    resolve_fclose();
    int fd = watched_stream(fp);
    if (fd < 0) return real_fclose(fp);
    /* Its last flush happens inside: where it goes is told before, the line after. */
    char p[MAX_PATH];
    strcpy(p, paths[fd]);
    long long pending = buffered(fp);
    long long at = lseek(fd, 0, SEEK_CUR);
    int flags = (int)syscall(SYS_fcntl, fd, F_GETFL);
    struct stat st;
    if (flags >= 0 && (flags & O_APPEND) && fstat(fd, &st) == 0) at = (long long)st.st_size;
    untrack(fd); /* its descriptor is closed inside, past this library's close */
    world[fd] = osync[fd] = 0;
    hold(1);
    int got = real_fclose(fp);
    int saved = errno;
    if (got == 0 && pending > 0) {
        char words[64] = "";
        if (stat(p, &st) == 0) {
            changed_below(&st, at);
            stat_words(&st, words, sizeof words);
        }
        emit("write %d %lld %lld%s\t%s", getpid(), at < 0 ? 0 : at, pending, words, p);
    }
    release(1);
    errno = saved;
    return got;
}

static int made_temp(int fd, const char *name, int flags) {
    char abs[MAX_PATH];
    int saved = errno;
    if (fd >= 0 && resolve_watched(AT_FDCWD, name, abs, 0)) {
        track(fd, abs);
        if (fd < MAX_FDS) osync[fd] = (flags & O_DSYNC) != 0;
        made(fd, abs, 0, 0);
    }
    errno = saved;
    return fd;
}
/* glibc's mkstemp family opens through its own internal open. */
int mkstemp(char *name) {
    resolve_mkstemp();
    char abs[MAX_PATH];
    int watch = resolve_watched(AT_FDCWD, name, abs, 0);
    hold(watch);
    int fd = made_temp(real_mkstemp(name), name, 0);
    release(watch);
    return fd;
}
int mkstemp64(char *name) {
    resolve_mkstemp64();
    char abs[MAX_PATH];
    int watch = resolve_watched(AT_FDCWD, name, abs, 0);
    hold(watch);
    int fd = made_temp(real_mkstemp64(name), name, 0);
    release(watch);
    return fd;
}
int mkostemp(char *name, int flags) {
    resolve_mkostemp();
    char abs[MAX_PATH];
    int watch = resolve_watched(AT_FDCWD, name, abs, 0);
    hold(watch);
    int fd = made_temp(real_mkostemp(name, flags), name, flags);
    release(watch);
    return fd;
}
int mkostemp64(char *name, int flags) {
    resolve_mkostemp64();
    char abs[MAX_PATH];
    int watch = resolve_watched(AT_FDCWD, name, abs, 0);
    hold(watch);
    int fd = made_temp(real_mkostemp64(name, flags), name, flags);
    release(watch);
    return fd;
}

/* -- truncating ---------------------------------------------------------------------- */

static int truncated(int fd, long long length, int got) {
    char p[MAX_PATH];
    int saved = errno;
    if (got == 0 && tracked(fd, p)) {
        struct stat st;
        char words[64] = "";
        if (fstat(fd, &st) == 0) {
            changed_below(&st, length);
            stat_words(&st, words, sizeof words);
        }
        emit("ftruncate %d %lld%s\t%s", getpid(), length, words, p);
    }
    errno = saved;
    return got;
}
int ftruncate(int fd, off_t length) {
    resolve_ftruncate();
    int w = fd_watched(fd);
    hold(w);
    int got = truncated(fd, length, real_ftruncate(fd, length));
    release(w);
    return got;
}
int ftruncate64(int fd, off64_t length) {
    resolve_ftruncate64();
    int w = fd_watched(fd);
    hold(w);
    int got = truncated(fd, length, real_ftruncate64(fd, length));
    release(w);
    return got;
}
static int path_truncated(int watch, const char *abs, long long length, int got) {
    int saved = errno;
    if (got == 0 && watch) {
        struct stat st;
        char words[64] = "";
        if (stat(abs, &st) == 0) {
            changed_below(&st, length);
            stat_words(&st, words, sizeof words);
        }
        emit("ftruncate %d %lld%s\t%s", getpid(), length, words, abs);
    }
    errno = saved;
    return got;
}
int truncate(const char *path, off_t length) {
    resolve_truncate();
    char abs[MAX_PATH];
    int watch = resolve_watched(AT_FDCWD, path, abs, 1);
    hold(watch);
    int got = path_truncated(watch, abs, length, real_truncate(path, length));
    release(watch);
    return got;
}
int truncate64(const char *path, off64_t length) {
    resolve_truncate64();
    char abs[MAX_PATH];
    int watch = resolve_watched(AT_FDCWD, path, abs, 1);
    hold(watch);
    int got = path_truncated(watch, abs, length, real_truncate64(path, length));
    release(watch);
    return got;
}

/* -- making durable ------------------------------------------------------------------- */

/* Copy from `in` (from byte `from`) to `out` (at the same place) until its end; the end
 * reached, or -1. */
static off_t copy_from(int in, int out, off_t from) {
    if (lseek(out, from, SEEK_SET) != from) return -1;
    off_t offset = from;
    ssize_t n;
    /* The system call itself: this library's own sendfile would trace the copy. */
    while ((n = (ssize_t)syscall(SYS_sendfile, out, in, &offset, (size_t)1 << 20)) > 0) {
    }
    return n < 0 ? -1 : offset;
}

/* The file behind fd, as it is now, in an image file: the last one of this file extended
 * when the file only grew since, else a new one. Its number, the image's size in *size
 * and the file's modification time (as " MTIME") in mtime, or 0. */
static unsigned long snapshot(int fd, off_t *size, char *mtime, size_t mtime_len) {
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    int in = raw_open(link, O_RDONLY, 0); /* the same file, even renamed or write-only */
    struct stat st;
    if (in < 0) return 0;
    if (fstat(in, &st) != 0) {
        raw_close(in);
        return 0;
    }
    snprintf(mtime, mtime_len, " %lld",
             (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec);
    char image[MAX_PATH + 64];
    unsigned long seq = 0;
    pthread_mutex_lock(&lock);
    struct image_of *img = image_for(st.st_dev, st.st_ino);
    if (img && !img->dirty && st.st_size >= img->size) {
        snprintf(image, sizeof image, "%s/img-%d-%lu", trace_dir, getpid(), img->seq);
        int out = raw_open(image, O_WRONLY, 0);
        off_t end = out < 0 ? -1 : copy_from(in, out, img->size);
        if (out >= 0) raw_close(out);
        if (end >= 0) {
            img->size = *size = end;
            seq = img->seq;
        }
    }
    if (!seq) {
        int out = -1;
        for (int tries = 0; tries < 1000 && out < 0; tries++) {
            seq = __atomic_add_fetch(&image_seq, 1, __ATOMIC_SEQ_CST);
            snprintf(image, sizeof image, "%s/img-%d-%lu", trace_dir, getpid(), seq);
            out = raw_open(image, O_WRONLY | O_CREAT | O_EXCL, 0600);
            if (out < 0 && errno != EEXIST) break;
        }
        off_t end = out < 0 ? -1 : copy_from(in, out, 0);
        if (out >= 0) raw_close(out);
        if (end < 0) {
            seq = 0;
        } else {
            if (!img) {
                img = &images[image_next];
                image_next = (image_next + 1) % MAX_IMAGES;
            }
            *img = (struct image_of){st.st_dev, st.st_ino, seq, end, 0, 1};
            *size = end;
        }
    }
    pthread_mutex_unlock(&lock);
    raw_close(in);
    return seq;
}

static int synced(int fd, int (*call)(void *), void *arg) {
    char p[MAX_PATH];
    if (!tracked(fd, p)) {
        int got = call(arg);
        if (got == 0 && fd >= 0 && fd < MAX_FDS && world[fd]) world_synced = 1;
        return got;
    }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* SQLite syncs a new WAL or journal's folder right after the file: the world's
         * durability, which lends none to the agent's files (the world is outside). */
        int world_own = world_synced;
        int got = call(arg);
        int saved = errno;
        if (got == 0) emit("%s %d\t%s", world_own ? "worlddirfsync" : "dirfsync", getpid(), p);
        errno = saved;
        return got;
    }
    off_t size = 0;
    char mtime[32] = "";
    unsigned long seq = snapshot(fd, &size, mtime, sizeof mtime);
    int got = call(arg);
    int saved = errno;
    if (got == 0 && seq)
        emit("fsync %d img-%d-%lu %lld%s\t%s", getpid(), getpid(), seq, (long long)size, mtime, p);
    else if (got == 0) emit("overflow %d\t%s", getpid(), p); /* synced, but no image of it */
    errno = saved;
    return got;
}

/* A write through an O_SYNC/O_DSYNC descriptor has returned: durable, as an fsync makes. */
static void durable_now(int fd, const char *path) {
    off_t size = 0;
    char mtime[32] = "";
    unsigned long seq = snapshot(fd, &size, mtime, sizeof mtime);
    if (seq)
        emit("fsync %d img-%d-%lu %lld%s\t%s", getpid(), getpid(), seq, (long long)size, mtime,
             path);
    else
        emit("overflow %d\t%s", getpid(), path);
}

struct range_args { int fd; off64_t at, n; unsigned int flags; };
static int call_fsync(void *a) { resolve_fsync(); return real_fsync(*(int *)a); }
static int call_fdatasync(void *a) { resolve_fdatasync(); return real_fdatasync(*(int *)a); }
static int call_range(void *a) {
    struct range_args *r = a;
    resolve_sync_file_range();
    return real_sync_file_range(r->fd, r->at, r->n, r->flags);
}
int fsync(int fd) { return synced(fd, call_fsync, &fd); }
int fdatasync(int fd) { return synced(fd, call_fdatasync, &fd); }
/* It starts (or waits for) the writing of a range of the page cache, and makes nothing
 * durable: it writes no metadata (the file's size, a new block's place) and does not flush
 * the drive's cache (sync_file_range(2)). Its line only says it was called. */
int sync_file_range(int fd, off64_t at, off64_t n, unsigned int flags) {
    struct range_args r = {fd, at, n, flags};
    int got = call_range(&r);
    int saved = errno;
    char p[MAX_PATH];
    if (got == 0 && tracked(fd, p)) emit("rangesync %d\t%s", getpid(), p);
    errno = saved;
    return got;
}

void sync(void) {
    resolve_sync();
    real_sync();
    if (active()) emit("sync %d", getpid());
}
int syncfs(int fd) {
    resolve_syncfs();
    int got = real_syncfs(fd);
    int saved = errno;
    if (got == 0 && active()) emit("sync %d", getpid());
    errno = saved;
    return got;
}

static void mapped(int fd, int prot, int flags) {
    char p[MAX_PATH];
    if ((prot & PROT_WRITE) && (flags & MAP_SHARED) && tracked(fd, p)) emit("mmap %d\t%s", getpid(), p);
}
void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t at) {
    resolve_mmap();
    void *got = real_mmap(addr, len, prot, flags, fd, at);
    int saved = errno;
    if (got != MAP_FAILED) mapped(fd, prot, flags);
    errno = saved;
    return got;
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t at) {
    resolve_mmap64();
    void *got = real_mmap64(addr, len, prot, flags, fd, at);
    int saved = errno;
    if (got != MAP_FAILED) mapped(fd, prot, flags);
    errno = saved;
    return got;
}

/* -- names ---------------------------------------------------------------------------- */


/* Paths of a two-name call, told before it runs (a relative path may depend on names it
 * changes); 1 when either lies under the root. */
static int two_names(int fd1, const char *p1, int fd2, const char *p2, char *a1, char *a2) {
    if (!active()) return 0;
    int ok1 = absolute(fd1, p1, a1, 0), ok2 = absolute(fd2, p2, a2, 0);
    if (!ok1) a1[0] = 0;
    if (!ok2) a2[0] = 0;
    return (ok1 && watched(a1)) || (ok2 && watched(a2));
}

static int moved(int got, const char *kind, int watch, const char *a1, const char *a2) {
    int saved = errno;
    if (got == 0 && watch) {
        emit("%s %d\t%s\t%s", kind, getpid(), a1, a2);
        if (kind[0] == 'r') renamed(a1, a2);
    }
    errno = saved;
    return got;
}

int mkdir(const char *path, mode_t mode) {
    resolve_mkdir();
    char abs[MAX_PATH];
    int watch = resolve_watched(AT_FDCWD, path, abs, 0);
    hold(watch);
    int got = real_mkdir(path, mode);
    int saved = errno;
    if (got == 0 && watch) emit("mkdir %d\t%s", getpid(), abs);
    release(watch);
    errno = saved;
    return got;
}
int mkdirat(int dirfd, const char *path, mode_t mode) {
    resolve_mkdirat();
    char abs[MAX_PATH];
    int watch = resolve_watched(dirfd, path, abs, 0);
    hold(watch);
    int got = real_mkdirat(dirfd, path, mode);
    int saved = errno;
    if (got == 0 && watch) emit("mkdir %d\t%s", getpid(), abs);
    release(watch);
    errno = saved;
    return got;
}
int rmdir(const char *path) {
    resolve_rmdir();
    char abs[MAX_PATH];
    int watch = resolve_watched(AT_FDCWD, path, abs, 0);
    hold(watch);
    int got = real_rmdir(path);
    int saved = errno;
    if (got == 0 && watch) emit("rmdir %d\t%s", getpid(), abs);
    release(watch);
    errno = saved;
    return got;
}
int unlink(const char *path) {
    resolve_unlink();
    char abs[MAX_PATH];
    int watch = resolve_watched(AT_FDCWD, path, abs, 0);
    hold(watch);
    int got = real_unlink(path);
    int saved = errno;
    if (got == 0 && watch) emit("unlink %d\t%s", getpid(), abs);
    release(watch);
    errno = saved;
    return got;
}
int unlinkat(int dirfd, const char *path, int flags) {
    resolve_unlinkat();
    char abs[MAX_PATH];
    int watch = resolve_watched(dirfd, path, abs, 0);
    hold(watch);
    int got = real_unlinkat(dirfd, path, flags);
    int saved = errno;
    if (got == 0 && watch) emit("%s %d\t%s", (flags & AT_REMOVEDIR) ? "rmdir" : "unlink", getpid(), abs);
    release(watch);
    errno = saved;
    return got;
}
int rename(const char *from, const char *to) {
    resolve_rename();
    char a1[MAX_PATH], a2[MAX_PATH];
    int watch = two_names(AT_FDCWD, from, AT_FDCWD, to, a1, a2);
    hold(watch);
    int got = moved(real_rename(from, to), "rename", watch, a1, a2);
    release(watch);
    return got;
}
int renameat(int fd1, const char *from, int fd2, const char *to) {
    resolve_renameat();
    char a1[MAX_PATH], a2[MAX_PATH];
    int watch = two_names(fd1, from, fd2, to, a1, a2);
    hold(watch);
    int got = moved(real_renameat(fd1, from, fd2, to), "rename", watch, a1, a2);
    release(watch);
    return got;
}
int renameat2(int fd1, const char *from, int fd2, const char *to, unsigned int flags) {
    resolve_renameat2();
    char a1[MAX_PATH], a2[MAX_PATH];
    int watch = two_names(fd1, from, fd2, to, a1, a2);
    /* RENAME_EXCHANGE swaps two names: told as such, the replay refuses it. */
    const char *kind = (flags & 2) ? "exchange" : "rename";
    hold(watch);
    int got = moved(real_renameat2(fd1, from, fd2, to, flags), kind, watch, a1, a2);
    release(watch);
    return got;
}
int link(const char *from, const char *to) {
    resolve_link();
    char a1[MAX_PATH], a2[MAX_PATH];
    int watch = two_names(AT_FDCWD, from, AT_FDCWD, to, a1, a2);
    hold(watch);
    int got = moved(real_link(from, to), "link", watch, a1, a2);
    release(watch);
    return got;
}
int linkat(int fd1, const char *from, int fd2, const char *to, int flags) {
    resolve_linkat();
    char a1[MAX_PATH], a2[MAX_PATH];
    int watch = two_names(fd1, from, fd2, to, a1, a2);
    hold(watch);
    int got = moved(real_linkat(fd1, from, fd2, to, flags), "link", watch, a1, a2);
    release(watch);
    return got;
}
