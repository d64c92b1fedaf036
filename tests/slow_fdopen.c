// Preloaded into a program (LD_PRELOAD) by output_file_test: every fdopen
// waits 200 ms first, so a signal sent the moment a writer's temporary
// appears lands between the temporary's creation and the writer's next step
// -- the window a signal must not leave the file behind in.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>

FILE* fdopen(int fd, const char* mode) {
  static FILE* (*real)(int, const char*);
  if (!real) real = (FILE * (*)(int, const char*)) dlsym(RTLD_NEXT, "fdopen");
  usleep(200000);
  return real(fd, mode);
}
