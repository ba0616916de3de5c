# ninfer - locate the Debian-packaged libraries. Each sets an imported target or a clear error.
# On the GPU machine (NINFER_ONLY_GPU_TESTS) only what core, kernels and their tests need is looked up;
# NINFER_DEPS_ROOT points at Debian packages unpacked with dpkg -x (see tests/gpu/run.sh).
set(NINFER_DEPS_ROOT "" CACHE PATH "Prefix of Debian packages unpacked with dpkg -x (GPU machine)")
if(NINFER_DEPS_ROOT)
    list(PREPEND CMAKE_PREFIX_PATH "${NINFER_DEPS_ROOT}/usr" "${NINFER_DEPS_ROOT}/usr/lib/x86_64-linux-gnu")
    include_directories(SYSTEM "${NINFER_DEPS_ROOT}/usr/include")
    link_directories("${NINFER_DEPS_ROOT}/usr/lib/x86_64-linux-gnu")
endif()

find_package(PkgConfig REQUIRED)

# PCRE2 (tokenizer pre-tokenizer regex)
find_path(PCRE2_INCLUDE_DIR pcre2.h REQUIRED)
find_library(PCRE2_LIBRARY NAMES libpcre2-8.a pcre2-8 REQUIRED)
add_library(ninfer_dep_pcre2 INTERFACE)
target_include_directories(ninfer_dep_pcre2 SYSTEM INTERFACE ${PCRE2_INCLUDE_DIR})
target_link_libraries(ninfer_dep_pcre2 INTERFACE ${PCRE2_LIBRARY})
target_compile_definitions(ninfer_dep_pcre2 INTERFACE PCRE2_CODE_UNIT_WIDTH=8)

# simdjson (JSON parsing everywhere: artifact directory, configs, HTTP bodies)
find_path(SIMDJSON_INCLUDE_DIR simdjson.h REQUIRED)
find_library(SIMDJSON_LIBRARY NAMES libsimdjson.a simdjson REQUIRED)
add_library(ninfer_dep_simdjson INTERFACE)
target_include_directories(ninfer_dep_simdjson SYSTEM INTERFACE ${SIMDJSON_INCLUDE_DIR})
target_link_libraries(ninfer_dep_simdjson INTERFACE ${SIMDJSON_LIBRARY})

if(NOT NINFER_ONLY_GPU_TESTS)
    pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv)
    pkg_check_modules(LIBSYSTEMD REQUIRED IMPORTED_TARGET libsystemd)
    pkg_check_modules(LIBURING REQUIRED IMPORTED_TARGET liburing)
    pkg_check_modules(FFMPEG REQUIRED IMPORTED_TARGET libavcodec libavformat libavutil libswscale)
    # llhttp ships as C sources in Debian's node-llhttp.
    set(LLHTTP_DIR /usr/share/llhttp CACHE PATH "llhttp C sources (Debian node-llhttp)")
    find_path(LLHTTP_INCLUDE_DIR llhttp.h PATHS /usr/share/include/llhttp ${LLHTTP_DIR}/include REQUIRED)
    add_library(ninfer_dep_llhttp STATIC ${LLHTTP_DIR}/api.c ${LLHTTP_DIR}/http.c ${LLHTTP_DIR}/llhttp.c)
    target_include_directories(ninfer_dep_llhttp SYSTEM PUBLIC ${LLHTTP_INCLUDE_DIR})
    set_target_properties(ninfer_dep_llhttp PROPERTIES C_STANDARD 99)
    target_compile_options(ninfer_dep_llhttp PRIVATE -w)
endif()

if(NINFER_TESTS)
    find_path(CATCH2_INCLUDE_DIR catch2/catch.hpp REQUIRED)
endif()
