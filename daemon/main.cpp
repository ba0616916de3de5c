// ninfer::daemon - ninferd's entry point (filled in by the daemon core).
int main() { return 0; }
