// rosetctl's entry point: everything happens in cli::run.
#include "cli/app.h"

int main(int argc, char** argv) {
  return rosetctl::cli::run(argc, argv);
}
