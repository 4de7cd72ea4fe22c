/* fstrace: fsobserve's trace for programs no loader preloads it into (static binaries).
 *
 *   fstrace -- COMMAND [ARGS...]     run COMMAND traced; exit with its status
 *   fstrace --probe                  exit 0 when tracing works here, else say why (exit 1)
 *
 * It reads the same settings as fsobserve.c (HARNESS_FS_TRACE, the trace folder, and
 * HARNESS_FS_ROOT, the trial folder as a real path); without them it only runs COMMAND,
 * and with a trace it cannot open it says so in one line and exits 2.
 * The command runs in a child under a seccomp filter that stops it (SECCOMP_RET_TRACE)
 * at the calls fsobserve.c observes and lets every other call through untouched; this
 * process traces it and all it starts (ptrace), finds each call's paths through
 * /proc/PID/fd and /proc/PID/cwd, and appends to the trace the lines fsobserve.c writes,
 * in its format (see there). A call's line is written at its exit stop, once the call
 * returned and before the program goes on, as fsobserve writes it after the real call;
 * an fsync's image is taken at its entry stop, before the kernel runs it, through
 * /proc/PID/fd/N. Lines whose numbers only the call's end can tell (a write's size and
 * time) cannot come before it: a SIGKILL of the process group that lands between a call's
 * return and its line (the tracer dies with the command) leaves the change unseen, as
 * fsobserve's own window between the call and its line does, and the cut's check of each
 * file against its last line finds it and refuses the cut.
 *
 * Differences from the library: a write to a file that no longer has a name (unlinked
 * while open) is not written (no power cut brings such a file back); C stdio is seen as
 * the write calls it makes, flushes at exit included. Only the program's native
 * architecture is stopped (x86-64 or arm64): 32-bit calls of an x86-64 program pass
 * unseen, and so does io_uring; the cut's check finds what they changed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/ptrace.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* glibc's <sys/ptrace.h> clashes with <linux/ptrace.h>: the call itself, by number. */
static long trace_call(long request, pid_t pid, void *addr, void *data) {
    return syscall(SYS_ptrace, request, pid, addr, data);
}

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "fstrace knows the system calls of x86-64 and arm64 only"
#endif

#define MAX_PATH 1024
#define MAX_IMAGES 64

static char root[MAX_PATH];
static size_t root_len;
static char trace_dir[MAX_PATH];
static int trace_fd = -1;

/* -- the library's own files: raw system calls (a preloaded fsobserve must not see them) */

static int raw_open(const char *path, int flags, mode_t mode) {
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC, mode);
}
static ssize_t raw_write(int fd, const void *buf, size_t len) {
    return (ssize_t)syscall(SYS_write, fd, buf, len);
}
static int raw_close(int fd) { return (int)syscall(SYS_close, fd); }

/* -- the traced processes ------------------------------------------------------------ */

/* One process's images by inode (as fsobserve keeps them in each process it is loaded
 * in): what a later fsync of a file that only grew may extend. */
struct image_of { dev_t dev; ino_t ino; unsigned long seq; off_t size; int dirty, used; };
struct proc {
    pid_t tgid;
    unsigned long image_seq;
    struct image_of images[MAX_IMAGES];
    int image_next;
    struct proc *next;
};
static struct proc *procs;

enum call { NONE, OPENED, WROTE, TRUNCATED, SYNCED, DIRSYNCED, WORLDSYNCED, RANGESYNCED,
            SYNCALL, NAMED, MOVED, MAPPED };

/* A call stopped at its entry whose line waits for its exit. */
struct pending {
    enum call call;
    const char *kind;       /* NAMED and MOVED: the line's word */
    char path[MAX_PATH], to[MAX_PATH];
    int fd, existed, truncating, osync, sync, append, allocating;
    long long offset, length;
    unsigned long seq;      /* SYNCED: its image, 0 for none */
    off_t size;
    char mtime[32];
};

struct thread {
    pid_t tid, tgid;
    int world_synced; /* this thread's last sync was the world's */
    struct pending p;
    struct thread *next;
};
#define BUCKETS 1024
static struct thread *threads[BUCKETS];

static pid_t tgid_of(pid_t tid) {
    char file[64], line[256];
    snprintf(file, sizeof file, "/proc/%d/status", tid);
    FILE *f = fopen(file, "r");
    pid_t found = tid;
    if (!f) return tid;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Tgid: %d", &found) == 1) break;
    fclose(f);
    return found;
}

static struct proc *proc_of(pid_t tgid) {
    for (struct proc *p = procs; p; p = p->next)
        if (p->tgid == tgid) return p;
    struct proc *p = calloc(1, sizeof *p);
    if (!p) abort();
    p->tgid = tgid;
    p->next = procs;
    procs = p;
    return p;
}

static void forget_proc(pid_t tgid) {
    for (struct proc **p = &procs; *p; p = &(*p)->next) {
        if ((*p)->tgid == tgid) {
            struct proc *gone = *p;
            *p = gone->next;
            free(gone);
            return;
        }
    }
}

static struct thread *thread_of(pid_t tid) {
    struct thread **b = &threads[tid % BUCKETS];
    for (struct thread *t = *b; t; t = t->next)
        if (t->tid == tid) return t;
    struct thread *t = calloc(1, sizeof *t);
    if (!t) abort();
    t->tid = tid;
    t->tgid = tgid_of(tid);
    t->next = *b;
    *b = t;
    return t;
}

static void forget_thread(pid_t tid) {
    for (struct thread **t = &threads[tid % BUCKETS]; *t; t = &(*t)->next) {
        if ((*t)->tid == tid) {
            struct thread *gone = *t;
            *t = gone->next;
            free(gone);
            return;
        }
    }
}

/* -- lines --------------------------------------------------------------------------- */

static void emit(struct thread *t, const char *fmt, ...) {
    char line[3 * MAX_PATH + 128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof line - 1) n = sizeof line - 2;
    line[n++] = '\n';
    raw_write(trace_fd, line, (size_t)n);
    t->world_synced = 0;
}

/* -- paths --------------------------------------------------------------------------- */

/* "/a/./b//c/../d" -> "/a/b/d", in place (as fsobserve.c). */
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

static int under_root(const char *abs) {
    return root_len && strncmp(abs, root, root_len) == 0 &&
           (abs[root_len] == '/' || abs[root_len] == 0);
}
static int is_world(const char *abs) {
    const char *name = strrchr(abs, '/');
    return name && strncmp(name + 1, "world.db", 8) == 0;
}
static int watched(const char *abs) { return under_root(abs) && !is_world(abs); }

/* A string of the traced thread's memory, in out; 0 if it cannot be read whole. */
static int read_string(pid_t tid, unsigned long addr, char *out, size_t len) {
    size_t got = 0;
    while (got < len) {
        /* Up to the end of the page: the next one may not be mapped. */
        size_t chunk = 4096 - ((addr + got) % 4096);
        if (chunk > len - got) chunk = len - got;
        struct iovec local = {out + got, chunk}, remote = {(void *)(addr + got), chunk};
        ssize_t n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
        if (n <= 0) return 0;
        void *end = memchr(out + got, 0, (size_t)n);
        if (end) return 1;
        got += (size_t)n;
    }
    return 0;
}

static int read_long(pid_t tid, unsigned long addr, long long *out) {
    struct iovec local = {out, sizeof *out}, remote = {(void *)addr, sizeof *out};
    return process_vm_readv(tid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof *out;
}

static int read_link(const char *link, char *out) {
    ssize_t n = readlink(link, out, MAX_PATH - 1);
    if (n <= 0) return 0;
    out[n] = 0;
    return 1;
}

/* The real path of `spelled` (absolute) in out, as fsobserve.c's real_spelling. */
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

/* The absolute path the thread names by (dirfd, the string at addr), in out; 0 if it
 * cannot be told. The thread's own /proc/self and /proc/thread-self are its, not ours. */
static int absolute(struct thread *t, int dirfd, unsigned long addr, char *out, int follow) {
    char path[MAX_PATH], spelled[2 * MAX_PATH + 2];
    if (!addr || !read_string(t->tid, addr, path, sizeof path)) return 0;
    if (path[0] == '/') {
        if (strncmp(path, "/proc/self", 10) == 0 && (path[10] == '/' || !path[10]))
            snprintf(spelled, sizeof spelled, "/proc/%d%s", t->tgid, path + 10);
        else if (strncmp(path, "/proc/thread-self", 17) == 0 && (path[17] == '/' || !path[17]))
            snprintf(spelled, sizeof spelled, "/proc/%d/task/%d%s", t->tgid, t->tid, path + 17);
        else
            strcpy(spelled, path);
    } else {
        char link[64], base[MAX_PATH];
        if (dirfd == AT_FDCWD)
            snprintf(link, sizeof link, "/proc/%d/cwd", t->tid);
        else
            snprintf(link, sizeof link, "/proc/%d/fd/%d", t->tid, dirfd);
        if (!read_link(link, base)) return 0;
        snprintf(spelled, sizeof spelled, "%s/%s", base, path);
    }
    if (strlen(spelled) >= MAX_PATH) return 0;
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

static int resolve_watched(struct thread *t, int dirfd, unsigned long addr, char *out,
                           int follow) {
    out[0] = 0;
    return absolute(t, dirfd, addr, out, follow) && watched(out);
}

/* The watched file behind the thread's descriptor fd, in out; 0 if none (not a file
 * under the root, the world's database, or a file without a name any more). */
static int tracked(struct thread *t, int fd, char *out) {
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/fd/%d", t->tid, fd);
    if (fd < 0 || !read_link(link, out) || out[0] != '/') return 0;
    size_t n = strlen(out);
    if (n > 10 && strcmp(out + n - 10, " (deleted)") == 0) return 0;
    return watched(out);
}

/* Whether fd is the world's database (its syncs lend no durability to the agent's). */
static int world_fd(struct thread *t, int fd) {
    char link[64], target[MAX_PATH];
    snprintf(link, sizeof link, "/proc/%d/fd/%d", t->tid, fd);
    return fd >= 0 && read_link(link, target) && under_root(target) && is_world(target);
}

static int fd_stat(struct thread *t, int fd, struct stat *st) {
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/fd/%d", t->tid, fd);
    return stat(link, st);
}

/* The descriptor's position and open flags, from /proc/PID/fdinfo/N. */
static int fd_info(struct thread *t, int fd, long long *pos, int *flags) {
    char file[64], line[128];
    snprintf(file, sizeof file, "/proc/%d/fdinfo/%d", t->tid, fd);
    int in = raw_open(file, O_RDONLY, 0);
    if (in < 0) return 0;
    ssize_t n = read(in, line, sizeof line - 1);
    raw_close(in);
    if (n <= 0) return 0;
    line[n] = 0;
    long long p = 0;
    unsigned int f = 0;
    const char *at = strstr(line, "pos:");
    if (at) sscanf(at, "pos: %lld", &p);
    at = strstr(line, "flags:");
    if (at) sscanf(at, "flags: %o", &f);
    if (pos) *pos = p;
    if (flags) *flags = (int)f;
    return 1;
}

/* -- images, as fsobserve.c keeps them --------------------------------------------------- */

static struct image_of *image_for(struct proc *p, dev_t dev, ino_t ino) {
    for (int i = 0; i < MAX_IMAGES; i++)
        if (p->images[i].used && p->images[i].dev == dev && p->images[i].ino == ino)
            return &p->images[i];
    return NULL;
}

static void changed_below(struct thread *t, const struct stat *st, long long offset) {
    struct image_of *img = image_for(proc_of(t->tgid), st->st_dev, st->st_ino);
    if (img && offset < (long long)img->size) img->dirty = 1;
}

static void stat_words(const struct stat *st, char *out, size_t len) {
    snprintf(out, len, " %lld %lld", (long long)st->st_size,
             (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec);
}

static off_t copy_from(int in, int out, off_t from) {
    if (lseek(out, from, SEEK_SET) != from) return -1;
    off_t offset = from;
    ssize_t n;
    while ((n = (ssize_t)syscall(SYS_sendfile, out, in, &offset, (size_t)1 << 20)) > 0) {
    }
    return n < 0 ? -1 : offset;
}

/* The file behind the thread's fd as it is now, in an image file of its process (see
 * fsobserve.c's snapshot): its number, or 0. */
static unsigned long snapshot(struct thread *t, int fd, off_t *size, char *mtime,
                              size_t mtime_len) {
    char link[64];
    snprintf(link, sizeof link, "/proc/%d/fd/%d", t->tid, fd);
    int in = raw_open(link, O_RDONLY, 0);
    struct stat st;
    if (in < 0) return 0;
    if (fstat(in, &st) != 0) {
        raw_close(in);
        return 0;
    }
    snprintf(mtime, mtime_len, " %lld",
             (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec);
    struct proc *p = proc_of(t->tgid);
    char image[MAX_PATH + 64];
    unsigned long seq = 0;
    struct image_of *img = image_for(p, st.st_dev, st.st_ino);
    if (img && !img->dirty && st.st_size >= img->size) {
        snprintf(image, sizeof image, "%s/img-%d-%lu", trace_dir, t->tgid, img->seq);
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
            seq = ++p->image_seq;
            snprintf(image, sizeof image, "%s/img-%d-%lu", trace_dir, t->tgid, seq);
            out = raw_open(image, O_WRONLY | O_CREAT | O_EXCL, 0600);
            if (out < 0 && errno != EEXIST) break;
        }
        off_t end = out < 0 ? -1 : copy_from(in, out, 0);
        if (out >= 0) raw_close(out);
        if (end < 0) {
            seq = 0;
        } else {
            if (!img) {
                img = &p->images[p->image_next];
                p->image_next = (p->image_next + 1) % MAX_IMAGES;
            }
            *img = (struct image_of){st.st_dev, st.st_ino, seq, end, 0, 1};
            *size = end;
        }
    }
    raw_close(in);
    return seq;
}

static void durable_now(struct thread *t, int fd, const char *path) {
    off_t size = 0;
    char mtime[32] = "";
    unsigned long seq = snapshot(t, fd, &size, mtime, sizeof mtime);
    if (seq)
        emit(t, "fsync %d img-%d-%lu %lld%s\t%s", t->tgid, t->tgid, seq, (long long)size,
             mtime, path);
    else
        emit(t, "overflow %d\t%s", t->tgid, path);
}

/* -- the calls ----------------------------------------------------------------------- */

#define RWF_DSYNC_FLAG 0x2
#define RWF_SYNC_FLAG 0x4
#define RWF_APPEND_FLAG 0x10

/* A call at its entry stop: whether its exit must be seen (t->p says what to write). */
static int entered(struct thread *t, long nr, const unsigned long long *a) {
    struct pending *p = &t->p;
    memset(p, 0, sizeof *p);
    p->fd = -1;
    int dirfd = AT_FDCWD, flags = 0;
    unsigned long path = 0;
    switch (nr) {
#ifdef SYS_open
    case SYS_open: path = a[0], flags = (int)a[1]; goto opening;
    case SYS_creat: path = a[0], flags = O_CREAT | O_WRONLY | O_TRUNC; goto opening;
#endif
    case SYS_openat: dirfd = (int)a[0], path = a[1], flags = (int)a[2]; goto opening;
#ifdef SYS_openat2
    case SYS_openat2: {
        long long how_flags;
        if (!read_long(t->tid, a[2], &how_flags)) return 0;
        dirfd = (int)a[0], path = a[1], flags = (int)how_flags;
        goto opening;
    }
#endif
    opening: {
        if (!(flags & (O_CREAT | O_TRUNC))) return 0;
        if (!resolve_watched(t, dirfd, path, p->path, !(flags & O_NOFOLLOW))) return 0;
        struct stat before;
        p->existed = (flags & O_CREAT) ? lstat(p->path, &before) == 0 : 1;
        p->truncating = (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY;
        p->call = OPENED;
        return !p->existed || p->truncating;
    }
    case SYS_write: case SYS_writev: p->fd = (int)a[0], p->offset = -1; goto writing;
    case SYS_pwrite64: case SYS_pwritev: p->fd = (int)a[0], p->offset = (long long)a[3];
        goto writing;
    case SYS_pwritev2:
        p->fd = (int)a[0], p->offset = (long long)a[3];
        p->sync = (a[5] & (RWF_DSYNC_FLAG | RWF_SYNC_FLAG)) != 0;
        p->append = (a[5] & RWF_APPEND_FLAG) != 0;
        goto writing;
    case SYS_sendfile: p->fd = (int)a[0], p->offset = -1; goto writing;
    case SYS_copy_file_range: case SYS_splice:
        p->fd = (int)a[2], p->offset = -1;
        if (a[3] && !read_long(t->tid, a[3], &p->offset)) p->offset = -1;
        goto writing;
    writing: {
        if (!tracked(t, p->fd, p->path)) return 0;
        int fl = 0;
        fd_info(t, p->fd, NULL, &fl);
        p->osync = (fl & O_DSYNC) != 0;
        p->call = WROTE;
        return 1;
    }
    case SYS_fallocate:
        p->fd = (int)a[0], p->offset = (long long)a[2], p->length = (long long)a[3];
        if (!tracked(t, p->fd, p->path)) return 0;
        p->call = WROTE;
        p->allocating = 1; /* its line only when it returned 0, with its length */
        return 1;
    case SYS_ftruncate:
        p->fd = (int)a[0], p->length = (long long)a[1];
        if (!tracked(t, p->fd, p->path)) return 0;
        p->call = TRUNCATED;
        return 1;
    case SYS_truncate:
        p->length = (long long)a[1];
        if (!resolve_watched(t, AT_FDCWD, a[0], p->path, 1)) return 0;
        p->call = TRUNCATED;
        return 1;
    case SYS_fsync: case SYS_fdatasync: {
        p->fd = (int)a[0];
        if (!tracked(t, p->fd, p->path)) {
            p->call = world_fd(t, p->fd) ? WORLDSYNCED : NONE;
            return p->call != NONE;
        }
        struct stat st;
        if (fd_stat(t, p->fd, &st) == 0 && S_ISDIR(st.st_mode)) {
            p->call = DIRSYNCED;
            p->existed = t->world_synced; /* SQLite syncs a new WAL's folder after it */
            return 1;
        }
        p->seq = snapshot(t, p->fd, &p->size, p->mtime, sizeof p->mtime);
        p->call = SYNCED;
        return 1;
    }
    case SYS_sync_file_range:
        p->fd = (int)a[0];
        if (!tracked(t, p->fd, p->path)) return 0;
        p->call = RANGESYNCED;
        return 1;
    case SYS_sync: case SYS_syncfs: p->call = SYNCALL; return 1;
#ifdef SYS_mkdir
    case SYS_mkdir: path = a[0], p->kind = "mkdir"; goto naming;
    case SYS_rmdir: path = a[0], p->kind = "rmdir"; goto naming;
    case SYS_unlink: path = a[0], p->kind = "unlink"; goto naming;
#endif
    case SYS_mkdirat: dirfd = (int)a[0], path = a[1], p->kind = "mkdir"; goto naming;
    case SYS_unlinkat:
        dirfd = (int)a[0], path = a[1];
        p->kind = (a[2] & AT_REMOVEDIR) ? "rmdir" : "unlink";
        goto naming;
    naming:
        if (!resolve_watched(t, dirfd, path, p->path, 0)) return 0;
        p->call = NAMED;
        return 1;
    {
        int fd1, fd2;
        unsigned long from, to;
#ifdef SYS_rename
    case SYS_rename: fd1 = fd2 = AT_FDCWD, from = a[0], to = a[1], p->kind = "rename"; goto moving;
    case SYS_link: fd1 = fd2 = AT_FDCWD, from = a[0], to = a[1], p->kind = "link"; goto moving;
#endif
#ifdef SYS_renameat
    case SYS_renameat:
        fd1 = (int)a[0], from = a[1], fd2 = (int)a[2], to = a[3], p->kind = "rename";
        goto moving;
#endif
    case SYS_renameat2:
        fd1 = (int)a[0], from = a[1], fd2 = (int)a[2], to = a[3];
        p->kind = (a[4] & 2) ? "exchange" : "rename"; /* RENAME_EXCHANGE: the replay refuses */
        goto moving;
    case SYS_linkat:
        fd1 = (int)a[0], from = a[1], fd2 = (int)a[2], to = a[3], p->kind = "link";
        goto moving;
    moving: {
        int ok1 = absolute(t, fd1, from, p->path, 0), ok2 = absolute(t, fd2, to, p->to, 0);
        if (!ok1) p->path[0] = 0;
        if (!ok2) p->to[0] = 0;
        if (!((ok1 && watched(p->path)) || (ok2 && watched(p->to)))) return 0;
        p->call = MOVED;
        return 1;
    }
    }
    case SYS_mmap:
        p->fd = (int)a[4];
        if (!tracked(t, p->fd, p->path)) return 0;
        p->call = MAPPED;
        return 1;
    default:
        return 0;
    }
}

/* The call of t->p has returned `ret` (a negative errno on failure): its line. */
static void exited(struct thread *t, long long ret, int failed) {
    struct pending *p = &t->p;
    struct stat st;
    char words[64] = "";
    switch (p->call) {
    case OPENED:
        if (failed) break;
        if (fd_stat(t, (int)ret, &st) == 0) stat_words(&st, words, sizeof words);
        if (!p->existed) {
            struct image_of *img = words[0] ? image_for(proc_of(t->tgid), st.st_dev, st.st_ino)
                                            : NULL;
            if (img) img->used = 0; /* a new file: an image of an old one is not its */
            emit(t, "create %d%s\t%s", t->tgid, words, p->path);
        } else {
            if (words[0]) changed_below(t, &st, 0);
            emit(t, "trunc %d%s\t%s", t->tgid, words, p->path);
        }
        break;
    case WROTE: {
        long long n = p->allocating ? (failed || ret != 0 ? 0 : p->length) : (failed ? 0 : ret);
        if (n <= 0) break;
        long long at = p->offset;
        if (p->append) {
            at = fd_stat(t, p->fd, &st) == 0 ? (long long)st.st_size - n : 0;
        } else if (at < 0) {
            long long pos = 0;
            at = fd_info(t, p->fd, &pos, NULL) ? pos - n : 0;
        }
        if (fd_stat(t, p->fd, &st) == 0) {
            changed_below(t, &st, at);
            stat_words(&st, words, sizeof words);
        }
        emit(t, "write %d %lld %lld%s\t%s", t->tgid, at, n, words, p->path);
        if (p->sync || p->osync) durable_now(t, p->fd, p->path);
        break;
    }
    case TRUNCATED:
        if (failed) break;
        if ((p->fd >= 0 ? fd_stat(t, p->fd, &st) : stat(p->path, &st)) == 0) {
            changed_below(t, &st, p->length);
            stat_words(&st, words, sizeof words);
        }
        emit(t, "ftruncate %d %lld%s\t%s", t->tgid, p->length, words, p->path);
        break;
    case SYNCED:
        if (failed) break;
        if (p->seq)
            emit(t, "fsync %d img-%d-%lu %lld%s\t%s", t->tgid, t->tgid, p->seq,
                 (long long)p->size, p->mtime, p->path);
        else
            emit(t, "overflow %d\t%s", t->tgid, p->path); /* synced, but no image of it */
        break;
    case DIRSYNCED:
        if (!failed) emit(t, "%s %d\t%s", p->existed ? "worlddirfsync" : "dirfsync", t->tgid,
                          p->path);
        break;
    case WORLDSYNCED:
        if (!failed) t->world_synced = 1;
        break;
    case RANGESYNCED:
        if (!failed) emit(t, "rangesync %d\t%s", t->tgid, p->path);
        break;
    case SYNCALL:
        if (!failed) emit(t, "sync %d", t->tgid);
        break;
    case NAMED:
        if (!failed) emit(t, "%s %d\t%s", p->kind, t->tgid, p->path);
        break;
    case MOVED:
        if (!failed) emit(t, "%s %d\t%s\t%s", p->kind, t->tgid, p->path, p->to);
        break;
    case MAPPED:
        if (!failed) emit(t, "mmap %d\t%s", t->tgid, p->path);
        break;
    case NONE:
        break;
    }
    p->call = NONE;
}

/* -- the filter ---------------------------------------------------------------------- */

#define ARG_LOW(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define TRACE_RET BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE)
#define ALLOW_RET BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
#define LOAD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))

static struct sock_filter program[256];
static unsigned short length;

static void put(struct sock_filter f) { program[length++] = f; }

/* Stop at every call nr. */
static void always(long nr) {
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1));
    put((struct sock_filter)TRACE_RET);
}

/* Stop at call nr when its argument `arg` has a bit of `mask` (an open that creates or
 * truncates: the others change nothing). */
static void when_flags(long nr, int arg, unsigned mask) {
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 4));
    put((struct sock_filter)LOAD(ARG_LOW(arg)));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, mask, 0, 1));
    put((struct sock_filter)TRACE_RET);
    put((struct sock_filter)ALLOW_RET);
    put((struct sock_filter)LOAD(offsetof(struct seccomp_data, nr)));
}

static void build_filter(void) {
    put((struct sock_filter)LOAD(offsetof(struct seccomp_data, arch)));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0));
    put((struct sock_filter)ALLOW_RET);
    put((struct sock_filter)LOAD(offsetof(struct seccomp_data, nr)));
#ifdef SYS_open
    when_flags(SYS_open, 1, O_CREAT | O_TRUNC);
    always(SYS_creat);
    always(SYS_mkdir);
    always(SYS_rmdir);
    always(SYS_unlink);
    always(SYS_rename);
    always(SYS_link);
#endif
#ifdef SYS_renameat
    always(SYS_renameat);
#endif
    when_flags(SYS_openat, 2, O_CREAT | O_TRUNC);
#ifdef SYS_openat2
    always(SYS_openat2);
#endif
    const long calls[] = {SYS_write, SYS_pwrite64, SYS_writev, SYS_pwritev, SYS_pwritev2,
                          SYS_sendfile, SYS_copy_file_range, SYS_splice, SYS_fallocate,
                          SYS_ftruncate, SYS_truncate, SYS_fsync, SYS_fdatasync,
                          SYS_sync_file_range, SYS_sync, SYS_syncfs, SYS_mkdirat,
                          SYS_unlinkat, SYS_renameat2, SYS_linkat};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) always(calls[i]);
    /* mmap: a shared, writable mapping of a file only (the others are memory). */
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 7));
    put((struct sock_filter)LOAD(ARG_LOW(4)));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 5, 0));
    put((struct sock_filter)LOAD(ARG_LOW(3)));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_SHARED, 0, 3));
    put((struct sock_filter)LOAD(ARG_LOW(2)));
    put((struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_WRITE, 0, 1));
    put((struct sock_filter)TRACE_RET);
    put((struct sock_filter)ALLOW_RET);
}

static int install_filter(void) {
    build_filter();
    struct sock_fprog prog = {length, program};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* -- the tracer ---------------------------------------------------------------------- */

#define OPTIONS                                                                         \
    (PTRACE_O_TRACESECCOMP | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |                 \
     PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL | PTRACE_O_TRACESYSGOOD)

/* The child: waits until it is traced, then runs `run` (exec, or the probe's call). */
static pid_t start_child(char **argv, int probe, const char **why) {
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        *why = "pipe";
        return -1;
    }
    pid_t child = fork();
    if (child < 0) {
        *why = "fork";
        return -1;
    }
    if (child == 0) {
        char go;
        close(ready[1]);
        if (read(ready[0], &go, 1) != 1) _exit(126); /* the tracer could not attach */
        close(ready[0]);
        if (install_filter() != 0) {
            fprintf(stderr, "fstrace: cannot install the seccomp filter: %s\n", strerror(errno));
            _exit(125);
        }
        if (probe) _exit(syscall(SYS_fsync, -1) == -1 ? 0 : 124);
        execvp(argv[0], argv);
        fprintf(stderr, "fstrace: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    close(ready[0]);
    if (trace_call(PTRACE_SEIZE, child, NULL, (void *)(long)OPTIONS) != 0) {
        int saved = errno;
        close(ready[1]);
        waitpid(child, NULL, 0);
        errno = saved;
        *why = "ptrace";
        return -1;
    }
    if (write(ready[1], "g", 1) != 1) {
        *why = "pipe";
        return -1;
    }
    close(ready[1]);
    return child;
}

/* Trace until every traced process is gone: the first child's wait status. */
static int trace(pid_t child, int *seccomp_stops) {
    int result = 0;
    for (;;) {
        int status;
        pid_t tid = waitpid(-1, &status, __WALL);
        if (tid < 0) {
            if (errno == EINTR) continue;
            break; /* ECHILD: none left */
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            if (tid == child) result = status;
            struct thread *t = thread_of(tid);
            if (t->tgid == tid) forget_proc(tid);
            forget_thread(tid);
            continue;
        }
        if (!WIFSTOPPED(status)) continue;
        int sig = WSTOPSIG(status), event = (unsigned)status >> 16;
        struct thread *t = thread_of(tid);
        long request = PTRACE_CONT;
        long inject = 0;
        if (sig == (SIGTRAP | 0x80)) { /* the exit of a call whose line waits */
            struct ptrace_syscall_info info;
            if (trace_call(PTRACE_GET_SYSCALL_INFO, tid, (void *)sizeof info, &info) > 0 &&
                info.op == PTRACE_SYSCALL_INFO_EXIT)
                exited(t, info.exit.rval, info.exit.is_error);
            t->p.call = NONE;
        } else if (sig == SIGTRAP && event == PTRACE_EVENT_SECCOMP) {
            struct ptrace_syscall_info info;
            ++*seccomp_stops;
            if (trace_call(PTRACE_GET_SYSCALL_INFO, tid, (void *)sizeof info, &info) > 0 &&
                info.op == PTRACE_SYSCALL_INFO_SECCOMP &&
                entered(t, (long)info.seccomp.nr, (const unsigned long long *)info.seccomp.args))
                request = PTRACE_SYSCALL; /* its next stop is its exit */
        } else if (sig == SIGTRAP && event == PTRACE_EVENT_EXEC) {
            /* A new program: its images start afresh, as the library in it would. */
            unsigned long former = 0;
            trace_call(PTRACE_GETEVENTMSG, tid, NULL, &former);
            if ((pid_t)former != tid) forget_thread((pid_t)former);
            t->tgid = tid;
            forget_proc(tid);
            t->p.call = NONE;
        } else if (sig == SIGTRAP && (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK ||
                                      event == PTRACE_EVENT_CLONE)) {
            /* The new one is traced already. Its id may be one a thread gone unreported had
             * (threads ended by another's exec): its process is asked again, and a new
             * process's images start afresh, unless its own first stop came first and a
             * call of it is under way. */
            unsigned long made = 0;
            if (trace_call(PTRACE_GETEVENTMSG, tid, NULL, &made) == 0) {
                struct thread *n = thread_of((pid_t)made);
                if (n->p.call == NONE) n->tgid = tgid_of((pid_t)made);
                if (n->p.call == NONE && n->tgid == (pid_t)made) forget_proc(n->tgid);
            }
        } else if (event == PTRACE_EVENT_STOP) {
            if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
                request = PTRACE_LISTEN; /* a group stop: it stays stopped until SIGCONT */
        } else {
            inject = sig; /* a signal for the program: delivered */
        }
        trace_call(request, tid, NULL, (void *)inject);
    }
    return result;
}

/* 1 when both settings are set and the trace opens, 0 when they are not set; else says
 * why in one line and returns -1. */
static int settings(void) {
    const char *t = getenv("HARNESS_FS_TRACE");
    const char *r = getenv("HARNESS_FS_ROOT");
    if (!t || !r || !*t || !*r) return 0;
    if (strlen(t) + 16 >= MAX_PATH || strlen(r) + 2 >= MAX_PATH) {
        fprintf(stderr, "fstrace: HARNESS_FS_TRACE or HARNESS_FS_ROOT is too long\n");
        return -1;
    }
    strcpy(trace_dir, t);
    strcpy(root, r);
    root_len = strlen(root);
    while (root_len > 1 && root[root_len - 1] == '/') root[--root_len] = 0;
    char file[MAX_PATH];
    snprintf(file, sizeof file, "%s/trace", trace_dir);
    trace_fd = raw_open(file, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (trace_fd < 0) {
        fprintf(stderr, "fstrace: cannot open the trace %s: %s\n", file, strerror(errno));
        return -1;
    }
    return 1;
}

static int probe(void) {
    const char *why = "";
    int stops = 0;
    pid_t child = start_child(NULL, 1, &why);
    if (child < 0) {
        printf("%s: %s\n", why, strerror(errno));
        return 1;
    }
    int status = trace(child, &stops);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("the seccomp filter could not be installed (the traced child exited with %d)\n",
               WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        return 1;
    }
    if (stops != 1) {
        printf("the seccomp filter stopped %d calls, not the 1 it should\n", stops);
        return 1;
    }
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--probe") == 0) return probe();
    if (argc < 3 || strcmp(argv[1], "--") != 0) {
        fprintf(stderr, "usage: fstrace -- COMMAND [ARGS...] | fstrace --probe\n");
        return 2;
    }
    int set = settings();
    if (set < 0) return 2;
    if (set == 0) {
        execvp(argv[2], argv + 2); /* nothing to observe: the command alone */
        fprintf(stderr, "fstrace: cannot run %s: %s\n", argv[2], strerror(errno));
        return errno == ENOENT ? 127 : 126;
    }
    const char *why = "";
    pid_t child = start_child(argv + 2, 0, &why);
    if (child < 0) {
        fprintf(stderr, "fstrace: cannot trace %s: %s: %s\n", argv[2], why, strerror(errno));
        return 126;
    }
    /* A signal sent to the process group reaches the command too: this process waits for
     * it to end, and ends with it (SIGKILL, which cannot wait, ends both: EXITKILL). */
    signal(SIGTERM, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGQUIT, SIG_IGN);
    int stops = 0;
    int status = trace(child, &stops);
    if (WIFSIGNALED(status)) {
        /* Killed by a signal: by the same one (without a core of this process). */
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        signal(WTERMSIG(status), SIG_DFL);
        kill(getpid(), WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    return WEXITSTATUS(status);
}
