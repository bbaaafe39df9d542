// A shared library that is no plugin: it lacks SHARDMAP_PLUGIN's entry
// points.
extern "C" __attribute__((visibility("default"))) int not_a_plugin(void) {
  return 1;
}
