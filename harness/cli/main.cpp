// attnfuzz command line (subcommands are added in harness/cli/*.cpp).
#include <cstdio>
int main() {
  std::puts("attnfuzz: the CLI is being assembled; see README.md");
  return 2;
}
