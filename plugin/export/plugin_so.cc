// The exported .so is only this translation unit plus the whole internal library: the symbols themselves are
// defined by the adapters (plugin/adapters) and filtered by the version script made from exports.txt.
extern "C" const char icn_plugin_build_id[] = "icn " __DATE__;
