# ninfer tests - docs.refs can fail: run tests/doc_refs.cmake on tests/fixtures/docs_refs (a tree
# with one of each broken citation and path, and a file of good ones) and check that it fails
# naming exactly the broken ones.
# Run: cmake -DSOURCE=<source dir> -P tests/doc_refs_selftest.cmake
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${CMAKE_COMMAND} -DROOT=${SOURCE}/tests/fixtures/docs_refs
                        -P ${SOURCE}/tests/doc_refs.cmake
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(APPEND out "${err}")
if(rc EQUAL 0)
    message(FATAL_ERROR "doc refs self-test: the broken tree passed:\n${out}")
endif()
set(expected
    "core/bad.h:1: §7: docs/MODEL.md has no section 7"
    "core/bad.h:2: cites spec §4.1, which is not a document"
    "core/bad.h:3: cites model.md §1, which is not a document"
    "core/bad.h:4: §1-3.4: docs/MODEL.md has no section 3.4"
    "core/bare.h:1: §1 names no document"
    "docs/ARCHITECTURE.md:5: names `core/missing.h`, which does not exist")
set(missing "")
foreach(line IN LISTS expected)
    string(FIND "${out}" "${line}" at)
    if(at EQUAL -1)
        string(APPEND missing "\n  ${line}")
    endif()
endforeach()
string(REGEX MATCHALL "\n    [^\n]*" reported "${out}")
list(LENGTH reported n_reported)
list(LENGTH expected n_expected)
if(missing OR NOT n_reported EQUAL n_expected)
    message(FATAL_ERROR "doc refs self-test: expected exactly these ${n_expected} errors, missing:${missing}\n"
                        "got ${n_reported}:\n${out}")
endif()
message(STATUS "doc refs self-test: the ${n_expected} broken citations and paths are reported, the good ones are not")
