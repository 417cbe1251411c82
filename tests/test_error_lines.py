"""Error lines: the recogniser the retention measure and the reduction passes share.

Every line in the tables comes from a tool output in ``../shared/traces`` (swe: mini-swe-agent on
SWE-bench tasks; claude-code: Elixir/JS sessions), so the rules are tested on what agents really see.
"""

from __future__ import annotations

import pytest

from lightmem_plugin.reduction.error_lines import error_indexes, error_lines, is_error_line, is_status_line

ERROR = [
    "Traceback (most recent call last):",
    "Are you sure you wish to attempt to fix these? [Y/n] Traceback (most recent call last):",  # sqlfluff fix
    '  File "/testbed/django/db/models/options.py", line 208, in contribute_to_class',
    '  File "<frozen importlib._bootstrap>", line 1140, in _find_and_load_unlocked',
    '  File "/testbed/test_encoding_debug.py", line 30',
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
    "TypeError: float() argument must be a string or a real number, not 'Timedelta'",
    "ModuleNotFoundError: No module named 'marshmallow'",
    "AssertionError",
    "astroid.exceptions.AstroidIndexError: <exception str() failed>",
    "django.core.exceptions.ImproperlyConfigured: Requested setting INSTALLED_APPS, but settings are not configured",
    "django.http.response.Http404: Value 'test' not found",
    "json.decoder.JSONDecodeError: Unterminated string starting at: line 1 column 256 (char 255)",
    "Exception: Value 'test' not found",
    "Error: Build failed with 1 error:",
    "ERROR: test_q (__main__.QTests.test_q)",
    "ERROR: test_dataset (unittest.loader._FailedTest.test_dataset)",
    "test_add (test_math.TestMath.test_add) ... FAIL",  # unittest -v
    "test_q (__main__.QTests.test_q) ... ERROR",
    "check_137 ... FAILED: expected 3 replicas, found 2 (quorum lost)",  # a check script (wire audit)
    "FAILED (errors=1)",
    "E       AssertionError: Uninferable is not an instance of <class 'astroid.nodes.Func'>",
    "E   ModuleNotFoundError: No module named 'pytz'",
    "E       Not equal to tolerance rtol=1e-07, atol=0.0001",
    "FAILED tests/test_utils.py::test_from_datestring - RuntimeError: from_datestr...",
    "ERROR tests/unittest_nodes.py",
    "tests/test_utils.py::test_from_datestring FAILED                         [ 81%]",
    "pandas/_libs/tslibs/offsets.pyx:6213: KeyError",
    "x.py:3: error: Incompatible types in assignment",
    "src/main.c:12:5: error: expected ';' before '}' token",
    "error: patch failed: src/sqlfluff/rules/L031.py:211",
    "patch: **** malformed patch at line 23: @@ -1688,8 +1693,8 @@ class FilePathField(Field):",
    "Hunk #1 FAILED at 21.",
    "1 out of 1 hunk ignored -- saving rejects to file pydicom/valuerep.py.rej",
    "2 out of 3 hunks FAILED -- saving rejects to file django/utils/tree.py.rej",
    "Reversed (or previously applied) patch detected!  Assume -R? [n] ",
    'error: Could not resolve "js/app.js"',
    '\u2718 [ERROR] Could not resolve "js/app.js"',
    "     ** (RuntimeError) no :secret_key_base configuration found in SpotterWeb.Endpoint.",
    "     error: undefined function get/2 (expected SpotterWeb.ProjectReviewLiveTest to define such a "
    "function or for it to be imported, but none are available)",
    '     \u2514\u2500 test/spotter_web/live/project_review_live_test.exs:128: SpotterWeb.ProjectReviewLiveTest."test '
    'mount excludes closed annotations"/1',
]

NOT_ERROR = [
    "",
    '    print("Traceback (most recent call last):")',  # code that prints the header
    '    raise ValueError("x")',  # a file view: code that raises is not an error that happened
    "                raise ValueError(",
    "        raise DeserializationError() from exc",
    "    45\t            raise TypeError(other)",  # nl -ba / cat -n view
    "   227\u2192          raise ArgumentError,",  # Claude Code Read view
    "                except ValueError:",
    "        :raises AstroidIndexError: If the given index does not exist in the",  # docstring
    "    ValueError: if the width is negative",  # indented docstring entry
    'astroid/manager.py:        raise AstroidBuildingError("Unable to build an AST for {path}.")',  # grep hit
    "193:                raise AstroidImportError(",
    "+                raise NotSupportedError(",  # diff line
    "    FieldInstanceResolutionError,",
    "Errors Found: []",
    "Error in file_info_from_modpath: 'NoneType' object has no attribute 'name'",
    "\u2713 Test 3 passed: Raised AstroidIndexError as expected",
    "==================================== ERRORS ====================================",
    "    conn |> put_status(:bad_request) |> json(%{error: reason})",
    "      error: reason,",  # a keyword argument in code, not a diagnostic
    "    \u2514\u2500 lib/",  # a tree drawing, no line number
    "**Error handling strategy:**",
    "E = m * c ** 2",  # one space after E: code, not pytest
    "E       ",  # a blank pytest E line carries nothing
    "def compute_area(width, height):",
    "<returncode>1</returncode>",
    "os.path: the path module",  # dotted name, but lowercase last part
    "test_add (test_math.TestMath.test_add) ... ok",  # unittest -v, passed
    '    print("check ... FAILED")',  # code that prints a failure
    "Checking the replicas ... FAILED is what a bad run prints",  # prose, not a result line
    "patching file src/marshmallow/schema.py",  # patch's sign-off, also after a refused hunk
    "Hunk #1 succeeded at 582 (offset -45 lines).",
    "    # the patch ignored 2 hunks",
]


OTHER_LANGUAGES = [
    # not from the dev traces (Python, Elixir, JavaScript sessions): the shapes as each tool prints them
    "    at Object.<anonymous> (/home/u/app/index.js:3:7)",
    "    at Module._compile (node:internal/modules/cjs/loader:1256:14)",
    "    at async Promise.all (/home/u/app/run.mjs:12:3)",
    "    at new Parser (file:///home/u/app/parser.js:40:11)",
    "    at node:internal/main/run_main_module:23:47",
    " FAIL  src/sum.test.js",
    "  \u25cf sum \u203a adds 1 + 2 to equal 3",
    "   \u00d7 adds 1 + 2 (5ms)",
    " \u276f test/sum.test.ts:4:20",
    "src/app.ts(12,5): error TS2322: Type 'string' is not assignable to type 'number'.",
    "src/app.ts:12:5 - error TS2322: Type 'string' is not assignable to type 'number'.",
    "npm ERR! code ELIFECYCLE",
    'npm error Missing script: "build"',
    "  12:5  error  'x' is not defined  no-undef",
    'Exception in thread "main" java.lang.NullPointerException: Cannot invoke "String.length()"',
    "Caused by: java.lang.IllegalStateException: closed",
    "\tat com.example.App.main(App.java:5)",
    "\tat java.base/java.lang.Thread.run(Thread.java:833)",
    "panic: runtime error: index out of range [5] with length 3",
    "goroutine 1 [running]:",
    "\t/tmp/x/main.go:8 +0x1d",
    "--- FAIL: TestParse (0.00s)",
    "FAIL\tgithub.com/acme/parse\t0.012s",
    "    parse_test.go:12: expected 3, got 4",
    "thread 'main' panicked at src/main.rs:2:5:",
    "test tests::it_parses ... FAILED",
    "---- tests::it_parses stdout ----",
    "app.rb:3:in 'greet': undefined method 'upcase' for nil (NoMethodError)",
    "\tfrom app.rb:7:in '<main>'",
    "     Failure/Error: expect(sum(1, 2)).to eq(4)",
    "rspec ./spec/sum_spec.rb:4 # sum adds",
]

NOT_OTHER_LANGUAGES = [
    "    at the end of the run (see notes)",  # prose
    "    at least 3 retries",
    "from django.db import models",
    "  12:5  warning  'x' is assigned a value but never used  no-unused-vars",  # eslint warning
    "goroutine count: 5",
    "test tests::it_parses ... ok",
    "--- PASS: TestParse (0.00s)",
    "    --> see the docs",
]


@pytest.mark.parametrize("line", ERROR + OTHER_LANGUAGES)
def test_error_lines(line: str) -> None:
    assert is_error_line(line)


@pytest.mark.parametrize("line", NOT_OTHER_LANGUAGES)
def test_not_error_lines_of_other_languages(line: str) -> None:
    assert not is_error_line(line)


def test_a_rust_place_is_an_error_line_only_under_an_error() -> None:
    text = (
        "warning: unused variable: `x`\n --> src/main.rs:2:9\n  |\n2 |     let x = 1;\n\n"
        'error[E0308]: mismatched types\n --> src/main.rs:4:18\n  |\n4 |     let y: u32 = "a";\n'
    )
    assert error_lines(text) == ["error[E0308]: mismatched types", " --> src/main.rs:4:18"]


@pytest.mark.parametrize("line", NOT_ERROR)
def test_not_error_lines(line: str) -> None:
    assert not is_error_line(line)


def test_error_lines_of_a_text_in_order_with_repeats() -> None:
    text = "\n".join(
        [
            "<returncode>1</returncode>",
            "<output>",
            "Traceback (most recent call last):",
            '  File "/testbed/app.py", line 3, in <module>',
            "    raise ValueError('bad width')",
            "ValueError: bad width",
            "ValueError: bad width",
            "</output>",
        ]
    )
    assert error_lines(text) == [
        "Traceback (most recent call last):",
        '  File "/testbed/app.py", line 3, in <module>',
        "ValueError: bad width",
        "ValueError: bad width",
    ]
    assert error_lines("all 12 tests passed\nok") == []


@pytest.mark.parametrize(
    ("line", "status"),
    [
        ("<returncode>1</returncode>", True),
        ("<exit_code>0</exit_code>", True),  # Claude Code TaskOutput
        ("Exit code 2", True),
        ("Exit code: 0", True),
        ("Process exited with code 137", True),
        ("(Command exited with code 1)", True),
        ("exit status 3", True),
        ("the exit code is 0 because the test was skipped", False),  # prose that names an exit code
        ("    sys.exit(1)", False),
        ("<returncode>1</returncode> and more", False),
    ],
)
def test_a_status_line_says_only_how_the_command_ended(line: str, status: bool) -> None:
    assert is_status_line(line) is status


ELIXIR_COMPILE = """==> toml
Compiling 10 files (.ex)
     warning: using single-quoted strings to represent charlists is deprecated.
     Use ~c"" if you indeed want a charlist or use "" instead.
     │
 264 │       'abc'
     │       ~
     │
     └─ lib/decoder.ex:264:82

    error: undefined function get/2 (expected Foo to define such a function or for it to be imported)
    │
 12 │     get(x, y)
    │     ^^^
    │
    └─ test/x_test.exs:128: Mod."test a"/1

    └─ lib/orphan.ex:3
"""


def test_an_elixir_place_line_is_an_error_line_only_under_an_error() -> None:
    """``└─ path:line`` ends an Elixir error and a warning alike: only the error's place is an error
    line (a warning's place, kept while its message was cut, told the model nothing); a place line
    with no header above it stays one, as before."""
    lines = ELIXIR_COMPILE.split("\n")
    assert is_error_line(lines[8])  # alone, the line looks the same as an error's
    assert error_lines(ELIXIR_COMPILE) == [
        "    error: undefined function get/2 (expected Foo to define such a function or for it to be imported)",
        '    └─ test/x_test.exs:128: Mod."test a"/1',
        "    └─ lib/orphan.ex:3",
    ]
    assert error_indexes(lines) == {10, 15, 17}
