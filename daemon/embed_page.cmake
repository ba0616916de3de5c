# ninfer::daemon - turns an HTML page into a C++ header at build time (cmake -P, no other tools):
# the page's bytes as a string_view and the CSP source expressions ('sha256-BASE64') of its one
# inline <script> and one inline <style>, so the page runs under a Content-Security-Policy without
# 'unsafe-inline'. Fails the build when the page has another number of them or gives them
# attributes (a hash covers exactly the element's text; a second element would need its own).
#   cmake -DINPUT=page.html -DOUTPUT=page.h -DNAME=kMonitorPage -P embed_page.cmake
cmake_minimum_required(VERSION 3.20)

# Base64 of the bytes a hex string spells (RFC 4648, with '=' padding).
function(hex_to_base64 hex out_var)
    set(alphabet "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    string(LENGTH "${hex}" n_hex)
    set(result "")
    set(i 0)
    while(i LESS n_hex)
        math(EXPR left "${n_hex} - ${i}")
        if(left GREATER 6)
            set(left 6)
        endif()
        string(SUBSTRING "${hex}" ${i} ${left} group)
        math(EXPR n_bytes "${left} / 2")
        math(EXPR n_chars "${n_bytes} + 1")
        if(n_bytes EQUAL 1)
            string(APPEND group "0000")
        elseif(n_bytes EQUAL 2)
            string(APPEND group "00")
        endif()
        math(EXPR bits "0x${group}")
        set(k 0)
        foreach(shift 18 12 6 0)
            if(k LESS n_chars)
                math(EXPR index "(${bits} >> ${shift}) & 63")
                string(SUBSTRING "${alphabet}" ${index} 1 c)
                string(APPEND result "${c}")
            else()
                string(APPEND result "=")
            endif()
            math(EXPR k "${k} + 1")
        endforeach()
        math(EXPR i "${i} + 6")
    endwhile()
    set(${out_var} "${result}" PARENT_SCOPE)
endfunction()

# 'sha256-BASE64' of the text between the page's only <TAG> and </TAG>.
function(inline_hash page tag out_var)
    string(REGEX MATCHALL "<${tag}[ >]" opens "${page}")
    list(LENGTH opens n_opens)
    string(FIND "${page}" "<${tag}>" begin)
    if(NOT n_opens EQUAL 1 OR begin LESS 0)
        message(FATAL_ERROR "${INPUT}: needs exactly one inline <${tag}> without attributes (found ${n_opens})")
    endif()
    string(LENGTH "<${tag}>" open_len)
    math(EXPR begin "${begin} + ${open_len}")
    string(FIND "${page}" "</${tag}>" end)
    math(EXPR len "${end} - ${begin}")
    string(SUBSTRING "${page}" ${begin} ${len} body)
    string(SHA256 digest "${body}")
    hex_to_base64("${digest}" b64)
    set(${out_var} "sha256-${b64}" PARENT_SCOPE)
endfunction()

file(READ "${INPUT}" page)
inline_hash("${page}" script script_hash)
inline_hash("${page}" style style_hash)
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n_bytes "${n_hex} / 2")
string(REPEAT "[0-9a-f]" 64 line_of_hex) # 32 bytes per source line
string(REGEX REPLACE "(${line_of_hex})" "\\1\"\n    \"" hex "${hex}")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" escaped "${hex}")
get_filename_component(source_name "${INPUT}" NAME)
set(text "// Generated from daemon/${source_name} by daemon/embed_page.cmake at build time; edit the HTML instead.
#pragma once

#include <string_view>

namespace ninfer::daemon {

inline constexpr std::string_view ${NAME}{
    \"${escaped}\",
    ${n_bytes}};
inline constexpr std::string_view ${NAME}ScriptHash = \"${script_hash}\";
inline constexpr std::string_view ${NAME}StyleHash = \"${style_hash}\";

} // namespace ninfer::daemon
")
# Rewrite only on change, so an unchanged page does not rebuild its users.
file(WRITE "${OUTPUT}.tmp" "${text}")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
