// The translation unit that carries the unit tests' precompiled headers
// (tests/CMakeLists.txt, chronolink_test_pch): nothing of its own.
