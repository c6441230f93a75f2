// lathe-cli: placeholder main until the runner lands.
int main() { return 0; }
