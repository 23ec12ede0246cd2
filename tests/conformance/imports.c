/*
 * imports.c - registration.imports: the TF C API functions a plugin
 * imports, read from its file before TF's loader ever sees it.
 *
 * TF loads a plugin with dlopen(RTLD_NOW | RTLD_LOCAL)
 * (TF_LoadLibrary and TF_LoadPluggableDeviceLibrary, through
 * tsl::internal::LoadDynamicLibrary), so one function the plugin calls that
 * no loaded library exports fails the whole load: `import tensorflow`
 * raises NotFoundError "undefined symbol: NAME" for a plugin in
 * tensorflow-plugins/. TF's headers declare functions its libraries do not
 * export, and a plugin that calls one still builds (a shared library may
 * leave symbols undefined unless linked with --no-undefined). dlopen names
 * only the first missing symbol and says nothing of why; this reads the
 * plugin's ELF64 dynamic symbol table itself, before dlopen, and names
 * every missing one.
 *
 * The reader trusts nothing in the file: every offset and size is checked
 * against the file's length before it is read (pread, into buffers of the
 * checked size). A file dlopen could not load (not ELF, 32-bit, another
 * machine, segments cut off) fails the rule and is not dlopened at all:
 * glibc maps a truncated file's segments as they are and dies of SIGBUS
 * reading the pages past its end (measured on libconf_mini.so cut in half;
 * cut by one byte, it loads with that byte zero). Section headers are not
 * needed to load a file, only to list its imports: without usable ones the
 * rule is not checked, with a note saying why.
 *
 * Main thread only (registration); the state between the scan and the
 * verdict is this file's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pread, O_CLOEXEC under -std=c11 */
#endif
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conformance.h"

#define IMPORTS_RULES(X)                                                       \
  X(R_IMPORTS, "registration.imports", REQUIRED, "dlopen",                     \
    "The plugin is an ELF64 shared object for this machine, and every TF C "   \
    "API function it imports (an undefined, non-weak TF_, TFE_, TSL_, SE_ or " \
    "TP_ symbol of its dynamic symbol table) is exported by the TF "           \
    "release's libraries: TF loads plugins with dlopen(RTLD_NOW | "            \
    "RTLD_LOCAL) (tsl::internal::LoadDynamicLibrary, from TF_LoadLibrary and " \
    "TF_LoadPluggableDeviceLibrary), which fails on the first unresolved "     \
    "symbol, and `import tensorflow` raises NotFoundError \"undefined "        \
    "symbol\".")
CONF_RULES(conf_imports_rules, IMPORTS_RULES)

/* tensorflow/c/kernels_experimental.h's functions: declared by the headers
 * of every release 2.16-2.21, exported by libtensorflow_framework.so.2 in
 * 2.16-2.18 and by no library of TF 2.19, 2.20 and 2.21 (measured with
 * nm -D --defined-only on each release's wheel, scripts/tf_drift.py;
 * docs/tf-releases.md, the drift report). */
static const char* const kernels_experimental[] = {
    "TF_AddNVariant",
    "TF_AssignRefVariable",
    "TF_AssignUpdateVariable",
    "TF_AssignVariable",
    "TF_DestroyTemporaryVariable",
    "TF_GetInputByName",
    "TF_GetInputTensorFromVariable",
    "TF_IsRefInput",
    "TF_MaybeLockVariableInputMutexesInOrder",
    "TF_OpKernelConstruction_GetAttrTensorShape",
    "TF_OpKernelContext_ForwardRefInputToRefOutput",
    "TF_ReleaseVariableInputLockHolder",
    "TF_TemporaryVariable",
    "TF_ZerosLikeVariant",
};

/* What the scan found, for the verdict after dlopen. The failure's text
 * (report.c keeps 480 characters) is the counts, names, the hints, and
 * TF's directory last, where a long path is what gets cut. */
static struct {
  int checked;       /* the symbol table was read */
  int ntf;           /* TF C API symbols imported */
  int nmissing;      /* ... that no TF library exports */
  int nexperimental; /* ... of which kernels_experimental.h's */
  int nunknown;      /* ... that could not be looked up (see why) */
  int nlisted;       /* ... of which named in names */
  char names[120];   /* the first missing names, comma-separated */
  char why[256];     /* why some could not be looked up */
} scan;

#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#else
#define HOST_MACHINE EM_NONE /* not checked */
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HOST_DATA ELFDATA2LSB
#else
#define HOST_DATA ELFDATA2MSB
#endif

/* [off, off + len) lies inside a file of `size` bytes (no overflow). */
static int in_file(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

/* n bytes at off, all of them; 0 on a short read or an error. */
static int read_at(int fd, uint64_t off, void* buf, size_t n) {
  char* p = buf;
  while (n > 0) {
    ssize_t r = pread(fd, p, n, (off_t)off);
    if (r <= 0) return 0;
    p += r;
    off += (uint64_t)r;
    n -= (size_t)r;
  }
  return 1;
}

/* A table of `count` entries of `entsize` bytes at off, read into a new
 * buffer (the caller frees it); NULL with why set if it is not all inside
 * the file or cannot be read. */
static void* read_table(int fd, uint64_t size, uint64_t off, uint64_t count,
                        uint64_t entsize, const char* what, char* why,
                        size_t len) {
  if (entsize == 0 || count > size / entsize ||
      !in_file(off, count * entsize, size)) {
    snprintf(why, len,
             "its %s (%llu entries of %llu bytes at offset %llu) ends past "
             "the file's %llu bytes (truncated?)",
             what, (unsigned long long)count, (unsigned long long)entsize,
             (unsigned long long)off, (unsigned long long)size);
    return NULL;
  }
  size_t n = (size_t)(count * entsize);
  void* buf = malloc(n > 0 ? n : 1);
  if (buf == NULL) abort();
  if (!read_at(fd, off, buf, n)) {
    snprintf(why, len, "reading its %s failed", what);
    free(buf);
    return NULL;
  }
  return buf;
}

/* Why the ELF header or program headers make the file one dlopen cannot
 * load, or "" (then the file is an ELF64 shared object of this machine
 * whose segments are all inside it). */
static void check_loadable(int fd, uint64_t size, const Elf64_Ehdr* h,
                           char* why, size_t len) {
  if (size < SELFMAG || memcmp(h->e_ident, ELFMAG, SELFMAG) != 0) {
    snprintf(why, len, "not an ELF file (%llu bytes%s)",
             (unsigned long long)size,
             size >= SELFMAG ? ", no \\177ELF at the start" : "");
  } else if (size < sizeof(*h)) {
    snprintf(why, len, "truncated: %llu bytes, shorter than an ELF64 header",
             (unsigned long long)size);
  } else if (h->e_ident[EI_CLASS] != ELFCLASS64) {
    snprintf(why, len, "a %s ELF file: a 64-bit TF cannot load it",
             h->e_ident[EI_CLASS] == ELFCLASS32 ? "32-bit" : "malformed");
  } else if (h->e_ident[EI_DATA] != HOST_DATA) {
    snprintf(why, len, "an ELF file of the other byte order");
  } else if (h->e_type != ET_DYN) {
    snprintf(why, len,
             "not a shared object (ELF type %u: an executable or an object "
             "file)",
             (unsigned)h->e_type);
  } else if (HOST_MACHINE != EM_NONE && h->e_machine != HOST_MACHINE) {
    snprintf(why, len,
             "built for another machine (ELF machine %u, this one "
             "is %u)",
             (unsigned)h->e_machine, (unsigned)HOST_MACHINE);
  } else if (h->e_phentsize != sizeof(Elf64_Phdr)) {
    snprintf(why, len, "malformed: program header entries of %u bytes",
             (unsigned)h->e_phentsize);
  } else {
    Elf64_Phdr* ph =
        read_table(fd, size, h->e_phoff, h->e_phnum, sizeof(Elf64_Phdr),
                   "program header table", why, len);
    if (ph == NULL) return;
    int loads = 0;
    for (unsigned i = 0; i < h->e_phnum && why[0] == '\0'; i++) {
      if (ph[i].p_type != PT_LOAD) continue;
      loads++;
      if (!in_file(ph[i].p_offset, ph[i].p_filesz, size)) {
        snprintf(
            why, len,
            "truncated: segment %u ends at byte %llu, the file has "
            "%llu bytes (dlopen maps the missing bytes: they read as zeros, or "
            "kill the process with SIGBUS)",
            i,
            (unsigned long long)ph[i].p_offset +
                (unsigned long long)ph[i].p_filesz,
            (unsigned long long)size);
      }
    }
    if (loads == 0 && why[0] == '\0') {
      snprintf(why, len, "malformed: no loadable segment");
    }
    free(ph);
  }
}

/* The TF C API's prefixes. The plugin's own entry points (SE_InitPlugin,
 * TF_InitKernel, ...) are defined, not imported, so never looked up. */
static int tf_api_name(const char* s) {
  static const char* const prefixes[] = {"TF_", "TFE_", "TSL_", "SE_", "TP_"};
  for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
    if (strncmp(s, prefixes[i], strlen(prefixes[i])) == 0) return 1;
  }
  return 0;
}

static int is_experimental(const char* s) {
  for (size_t i = 0;
       i < sizeof(kernels_experimental) / sizeof(kernels_experimental[0]);
       i++) {
    if (strcmp(s, kernels_experimental[i]) == 0) return 1;
  }
  return 0;
}

static void look_up(const char* name) {
  scan.ntf++;
  char err[256] = "";
  int found = conf_tf_exports(name, err, sizeof(err));
  if (found < 0) {
    if (scan.nunknown++ == 0) snprintf(scan.why, sizeof(scan.why), "%s", err);
    return;
  }
  if (found) return;
  scan.nexperimental += is_experimental(name);
  size_t used = strlen(scan.names);
  /* Whole names, in table order, while they fit; the count says how many
   * were left out. */
  if (scan.nlisted == scan.nmissing &&
      used + strlen(name) + 3 < sizeof(scan.names)) {
    snprintf(scan.names + used, sizeof(scan.names) - used, "%s%s",
             used ? ", " : "", name);
    scan.nlisted++;
  }
  scan.nmissing++;
}

/* The dynamic symbol table's imports, from the section headers. Returns
 * 1 if it was read, else 0 with why set (the rule is then not checked:
 * dlopen reads the dynamic segment, not sections). */
static int scan_dynsym(int fd, uint64_t size, const Elf64_Ehdr* h, char* why,
                       size_t len) {
  if (h->e_shoff == 0) {
    snprintf(why, len, "it has no section headers (stripped?)");
    return 0;
  }
  if (h->e_shentsize != sizeof(Elf64_Shdr)) {
    snprintf(why, len, "its section header entries are %u bytes",
             (unsigned)h->e_shentsize);
    return 0;
  }
  /* More than 0xff00 sections: the count is section 0's sh_size. */
  uint64_t shnum = h->e_shnum;
  if (shnum == 0) {
    Elf64_Shdr* s0 = read_table(fd, size, h->e_shoff, 1, sizeof(Elf64_Shdr),
                                "section header table", why, len);
    if (s0 == NULL) return 0;
    shnum = s0->sh_size;
    free(s0);
  }
  Elf64_Shdr* sh = read_table(fd, size, h->e_shoff, shnum, sizeof(Elf64_Shdr),
                              "section header table", why, len);
  if (sh == NULL) return 0;
  Elf64_Sym* syms = NULL;
  char* str = NULL;
  const Elf64_Shdr* ds = NULL;
  const Elf64_Shdr* ss = NULL;
  uint64_t nsym = 0;
  for (uint64_t i = 0; i < shnum && ds == NULL; i++) {
    if (sh[i].sh_type == SHT_DYNSYM) ds = &sh[i];
  }
  if (ds == NULL) {
    snprintf(why, len, "it has no dynamic symbol table");
    goto out;
  }
  if (ds->sh_entsize != sizeof(Elf64_Sym) || ds->sh_link >= shnum ||
      sh[ds->sh_link].sh_type != SHT_STRTAB) {
    snprintf(why, len,
             "its dynamic symbol table is malformed (entries of "
             "%llu bytes, string table %u)",
             (unsigned long long)ds->sh_entsize, (unsigned)ds->sh_link);
    goto out;
  }
  ss = &sh[ds->sh_link];
  nsym = ds->sh_size / sizeof(Elf64_Sym);
  syms = read_table(fd, size, ds->sh_offset, nsym, sizeof(Elf64_Sym),
                    "dynamic symbol table", why, len);
  str = read_table(fd, size, ss->sh_offset, ss->sh_size, 1,
                   "dynamic string table", why, len);
  if (syms == NULL || str == NULL) goto out;
  for (uint64_t k = 1; k < nsym; k++) { /* 0 is the null symbol */
    const Elf64_Sym* s = &syms[k];
    /* A weak undefined symbol may stay unresolved (its address is NULL). */
    if (s->st_shndx != SHN_UNDEF || ELF64_ST_BIND(s->st_info) == STB_WEAK) {
      continue;
    }
    /* The name must end inside the string table. */
    if (s->st_name >= ss->sh_size ||
        memchr(str + s->st_name, '\0', ss->sh_size - s->st_name) == NULL) {
      snprintf(why, len,
               "symbol %llu's name lies outside its dynamic string table",
               (unsigned long long)k);
      goto out;
    }
    if (tf_api_name(str + s->st_name)) look_up(str + s->st_name);
  }
  scan.checked = 1;
out:
  free(str);
  free(syms);
  free(sh);
  return scan.checked;
}

int conf_imports_scan(const char* path) {
  memset(&scan, 0, sizeof(scan));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    /* Not a file we can read: dlopen says why (a set-up error). */
    if (fd >= 0) close(fd);
    return 1;
  }
  uint64_t size = (uint64_t)st.st_size;
  Elf64_Ehdr h;
  memset(&h, 0, sizeof(h));
  char why[256] = "";
  if (!read_at(fd, 0, &h, size < sizeof(h) ? (size_t)size : sizeof(h))) {
    snprintf(why, sizeof(why), "reading its ELF header failed");
  } else {
    check_loadable(fd, size, &h, why, sizeof(why));
  }
  if (why[0] != '\0') {
    close(fd);
    EXPECT(R_IMPORTS, 0, "%s: %s; not loaded", path, why);
    return 0;
  }
  if (!scan_dynsym(fd, size, &h, why, sizeof(why))) {
    conf_note("registration.imports not checked: %s", why);
  }
  close(fd);
  return 1;
}

int conf_imports_verdict(void* dl) {
  if (!scan.checked) return 0;
  int checked = scan.ntf - scan.nunknown;
  if (scan.nunknown > 0) {
    conf_note(
        "registration.imports: %d of the %d TF symbols the plugin imports "
        "not looked up: %s",
        scan.nunknown, scan.ntf, scan.why);
  }
  char more[48] = "";
  if (scan.nlisted < scan.nmissing) {
    snprintf(more, sizeof(more), "%s(%d more)", scan.nlisted ? " " : "",
             scan.nmissing - scan.nlisted);
  }
  /* dlopen succeeded: RTLD_NOW bound every one, so the missing ones came
   * from the plugin's own libraries, not TF's. */
  int ok = scan.nmissing == 0 || dl != NULL;
  EXPECT(R_IMPORTS, ok,
         "TF's libraries lack %d of the %d TF symbols it imports: %s%s; "
         "%s%s (TF in %s)",
         scan.nmissing, checked, scan.names, more,
         scan.nexperimental > 0
             ? "declared in TF's headers? kernels_experimental.h's functions "
               "are exported by no library of TF 2.19-2.21 "
               "(docs/tf-releases.md): look them up with dlsym"
             : "built against another TF release? --tf-dir",
         scan.nexperimental > 0 && scan.nexperimental < scan.nmissing
             ? "; the others: built against another TF release? --tf-dir"
             : "",
         conf_tf_dir());
  if (scan.nmissing == 0 && checked == 0) {
    conf_note("registration.imports: the plugin imports no TF symbol");
  } else if (scan.nmissing == 0) {
    conf_note(
        "registration.imports: all %d TF symbols the plugin imports are "
        "exported",
        checked);
  } else if (ok) {
    conf_note(
        "registration.imports: %d imported TF-style symbols are not TF's, "
        "but dlopen bound them (the plugin's own libraries?): %s%s",
        scan.nmissing, scan.names, more);
  }
  return !ok;
}
