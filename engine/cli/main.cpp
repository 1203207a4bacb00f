// engine/cli/main.cpp — entry point of the neusight executable.
#include "cli/app.h"

int main(int argc, char** argv) { return ns::app_main(argc, argv); }
