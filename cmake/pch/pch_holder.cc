// The translation unit that carries the libraries' and programs' precompiled
// headers (cmake/ChronolinkPch.cmake): nothing of its own.
