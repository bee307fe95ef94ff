from processors.runs.stack_traces import ParsedError, normalise_path, parse_error

PYTHON_CHAINED = '''Traceback (most recent call last):
  File "/srv/app/app/models.py", line 42, in load_user
    return USERS[user_id]
           ~~~~~^^^^^^^^^
KeyError: 'u-123'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/app/app/views.py", line 10, in get
    user = load_user(uid)
  File "/srv/app/.venv/lib/python3.11/site-packages/flask/app.py", line 880, in wsgi_app
    response = self.full_dispatch_request()
  File "/usr/lib/python3.11/json/decoder.py", line 337, in decode
    obj, end = self.raw_decode(s, idx=_w(s, 0).end())
  File "<frozen importlib._bootstrap>", line 1178, in _find_and_load
  File "/srv/app/app/models.py", line 44, in load_user
    raise NotFound(f"user {user_id} not found")
app.errors.NotFound: user u-123 not found
'''

JAVA_CAUSED_BY = '''2024-03-01 12:00:00,123 ERROR [http-nio-8080-exec-1] c.a.o.Controller - failed
java.lang.IllegalStateException: Failed to place order 42
\tat com.acme.orders.OrderService.place(OrderService.java:57)
\tat java.base/jdk.internal.reflect.NativeMethodAccessorImpl.invoke0(Native Method)
\tat com.acme.orders.OrderController.post(OrderController.java:31)
Caused by: org.springframework.dao.DataAccessResourceFailureException: save failed
\tat org.springframework.orm.jpa.Translator.translate(Translator.java:12)
\tat com.acme.orders.Repo.save(Repo.java:20)
\t... 2 more
Caused by: java.sql.SQLException: Connection refused: db.internal:5432
\tat org.postgresql.Driver.connect(Driver.java:285)
\tat java.base/java.lang.Thread.run(Thread.java:833)
\t... 4 more
\tSuppressed: java.io.IOException: close failed
\t\tat com.acme.orders.Repo.close(Repo.java:99)
'''

KOTLIN = '''Exception in thread "main" kotlin.KotlinNullPointerException
\tat com.acme.cli.ConfigKt.load(Config.kt:7)
\tat kotlin.io.ConsoleKt.readLine(Console.kt:1)
\tat com.acme.cli.AppKt.main(App.kt:3)
'''

SCALA = '''java.lang.ArithmeticException: / by zero
\tat com.acme.jobs.Stats$.$anonfun$mean$1(Stats.scala:12)
\tat scala.collection.immutable.List.map(List.scala:293)
\tat com.acme.jobs.Stats$.mean(Stats.scala:12)
\tat com.acme.jobs.Main$.main(Main.scala:5)
\tat com.acme.jobs.Main.main(Main.scala)
'''

NODE = '''/srv/app/src/users.js:12
    return user.id;
                ^

TypeError: Cannot read properties of undefined (reading 'id')
    at getUser (/srv/app/src/users.js:12:17)
    at Layer.handle [as handle_request] (/srv/app/node_modules/express/lib/router/layer.js:95:5)
    at async Promise.all (index 0)
    at /srv/app/src/index.js:30:3
    at processTicksAndRejections (node:internal/process/task_queues:95:5)

Node.js v20.11.0
'''

GO_PANIC = '''panic: runtime error: index out of range [5] with length 3

goroutine 1 [running]:
main.lookup(...)
\t/home/dev/proj/cmd/server/main.go:14
github.com/acme/proj/internal/store.(*DB).Get(0xc000010000, {0x4b2a3c, 0x3})
\t/home/dev/proj/internal/store/db.go:88 +0x1d
net/http.HandlerFunc.ServeHTTP(0x0?, {0x6c1c28?, 0xc0000b2000?}, 0x0?)
\t/usr/local/go/src/net/http/server.go:2136 +0x29
github.com/go-chi/chi/v5.(*Mux).ServeHTTP(0xc0000a4000, {0x6c1c28, 0xc0000b2000})
\t/home/dev/go/pkg/mod/github.com/go-chi/chi/v5@v5.0.10/mux.go:90 +0x2f
main.main()
\t/home/dev/proj/cmd/server/main.go:20 +0x1d

goroutine 7 [chan receive]:
main.worker()
\t/home/dev/proj/cmd/server/worker.go:9 +0x1d
exit status 2
'''

RUST_BACKTRACE = '''thread 'main' panicked at src/config.rs:12:5:
called `Option::unwrap()` on a `None` value
stack backtrace:
   0: rust_begin_unwind
             at /rustc/90c541806f23a127/library/std/src/panicking.rs:578:5
   1: core::panicking::panic_fmt
             at /rustc/90c541806f23a127/library/core/src/panicking.rs:67:14
   2: core::option::Option<T>::unwrap
             at /rustc/90c541806f23a127/library/core/src/option.rs:950:21
   3: myapp::config::load
             at ./src/config.rs:12:5
   4: myapp::main
             at ./src/main.rs:5:9
   5: core::ops::function::FnOnce::call_once
             at /rustc/90c541806f23a127/library/core/src/ops/function.rs:250:5
note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.
'''

RUST_FULL_BACKTRACE = '''thread 'main' panicked at src/config.rs:12:5:
called `Option::unwrap()` on a `None` value
stack backtrace:
   0:     0x55d4c1a2b3c4 - std::backtrace_rs::backtrace::libunwind::trace::h6e8f2a1b3c4d5e6f
                               at /rustc/90c5418/library/std/src/../../backtrace/libunwind.rs:93:5
  13:     0x55d4c1a2b3c4 - myapp::config::load::h0123456789abcdef
                               at /home/dev/myapp/src/config.rs:12:5
  14:     0x55d4c1a2b3c4 - myapp::main::hfedcba9876543210
                               at /home/dev/myapp/src/main.rs:5:9
  15:     0x55d4c1a2b3c4 - tokio::runtime::task::raw::poll::h0123456789abcdef
                               at /home/dev/.cargo/registry/src/index/tokio-1.35.0/src/raw.rs:9:5
'''

RUST_BEFORE_1_73 = '''thread 'tokio-runtime-worker' panicked at 'attempt to subtract \
with overflow', src/ledger.rs:88:17
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace
'''


def test_python_uses_the_last_exception_of_a_chain_and_its_application_frames() -> None:
    assert parse_error(PYTHON_CHAINED) == ParsedError(
        dialect="python",
        exception_type="app.errors.NotFound",
        message="user u-123 not found",
        frames=("app/models.py:load_user", "app/views.py:get"),
    )


def test_python_exception_without_message_or_conventional_name() -> None:
    trace = 'Traceback (most recent call last):\n  File "job.py", line 3, in <module>\n  f()\nBoom'
    parsed = parse_error(trace)
    assert (parsed.exception_type, parsed.message) == ("Boom", "")
    assert parsed.frames == ("job.py:<module>",)


def test_jvm_uses_the_innermost_cause_and_falls_back_to_outer_application_frames() -> None:
    parsed = parse_error(JAVA_CAUSED_BY)
    assert parsed.dialect == "jvm"
    assert parsed.exception_type == "java.sql.SQLException"
    assert parsed.message == "Connection refused: db.internal:5432"
    # The root cause's own frames are a driver's and the JDK's: the next cause out has the
    # application's; the suppressed exception's frames are no part of the chain.
    assert parsed.frames == ("org.postgresql.Driver.connect",)


def test_jvm_frames_of_the_root_cause_that_are_all_library_fall_back_outwards() -> None:
    trace = JAVA_CAUSED_BY.replace("\tat org.postgresql.Driver.connect(Driver.java:285)\n", "")
    assert parse_error(trace).frames == ("com.acme.orders.Repo.save",)


def test_jvm_lambda_frames_lose_their_hidden_class_and_suppressed_causes_are_skipped() -> None:
    trace = (
        "java.lang.IllegalStateException: boom\n"
        "\tat com.acme.Jobs$$Lambda$14/0x0000000800066840.accept(Unknown Source)\n"
        "\tSuppressed: java.io.IOException: close failed\n"
        "\t\tat com.acme.Repo.close(Repo.java:99)\n"
        "\tCaused by: java.net.SocketException: reset\n"
        "\t\tat com.acme.Net.read(Net.java:9)\n"
    )
    parsed = parse_error(trace)
    assert (parsed.exception_type, parsed.message) == ("java.lang.IllegalStateException", "boom")
    assert parsed.frames == ("com.acme.Jobs.accept",)


def test_kotlin_exception_in_thread_without_message() -> None:
    assert parse_error(KOTLIN) == ParsedError(
        dialect="jvm",
        exception_type="kotlin.KotlinNullPointerException",
        message="",
        frames=("com.acme.cli.ConfigKt.load", "com.acme.cli.AppKt.main"),
    )


def test_scala_frames_lose_their_generated_counters() -> None:
    parsed = parse_error(SCALA)
    assert parsed.exception_type == "java.lang.ArithmeticException"
    assert parsed.message == "/ by zero"
    assert parsed.frames == (
        "com.acme.jobs.Stats$.$anonfun$mean",
        "com.acme.jobs.Stats$.mean",
        "com.acme.jobs.Main$.main",
    )


def test_node_trace_skips_node_modules_and_internals() -> None:
    assert parse_error(NODE) == ParsedError(
        dialect="javascript",
        exception_type="TypeError",
        message="Cannot read properties of undefined (reading 'id')",
        frames=("src/users.js:getUser", "src/index.js:<anonymous>"),
    )


def test_node_error_with_code() -> None:
    trace = (
        "Error [ERR_INVALID_ARG_TYPE]: The \"path\" argument must be of type string\n"
        "    at readFile (node:fs:1:1)\n"
        "    at main (file:///home/dev/tool/bin/cli.mjs:4:9)\n"
    )
    parsed = parse_error(trace)
    assert (parsed.exception_type, parsed.frames) == ("Error", ("bin/cli.mjs:main",))


def test_go_panic_keeps_the_panicking_goroutine_s_own_frames() -> None:
    assert parse_error(GO_PANIC) == ParsedError(
        dialect="go",
        exception_type="panic",
        message="runtime error: index out of range [5] with length 3",
        frames=("server/main.go:main.lookup", "store/db.go:store.(*DB).Get",
                "server/main.go:main.main"),
    )


def test_go_recovered_panic_reports_the_first_panic() -> None:
    trace = ("panic: first [recovered]\n\tpanic: second\n\n"
             "goroutine 1 [running]:\nmain.main()\n\t/x/main.go:3\n")
    parsed = parse_error(trace)
    assert (parsed.message, parsed.frames) == ("first", ("x/main.go:main.main",))


def test_rust_panic_with_backtrace_keeps_the_crate_s_frames() -> None:
    assert parse_error(RUST_BACKTRACE) == ParsedError(
        dialect="rust",
        exception_type="panic",
        message="called `Option::unwrap()` on a `None` value",
        frames=("src/config.rs:myapp::config::load", "src/main.rs:myapp::main"),
    )


def test_rust_full_backtrace_drops_addresses_and_symbol_hashes() -> None:
    assert parse_error(RUST_FULL_BACKTRACE) == parse_error(RUST_BACKTRACE)


def test_rust_panic_before_1_73_without_backtrace_uses_the_panic_location() -> None:
    assert parse_error(RUST_BEFORE_1_73) == ParsedError(
        dialect="rust", exception_type="panic", message="attempt to subtract with overflow",
        frames=("src/ledger.rs",),
    )


def test_single_line_messages_with_and_without_exception_type() -> None:
    assert parse_error("KeyError: 'u-1'") == ParsedError("message", "KeyError", "'u-1'", ())
    assert parse_error("java.lang.NullPointerException") == ParsedError(
        "message", "java.lang.NullPointerException", "", ())
    assert parse_error("Note: disk full") == ParsedError("message", None, "Note: disk full", ())


def test_log_noise_before_a_message_does_not_hide_its_exception_type() -> None:
    assert parse_error("2024-01-02 03:04:05,678 ERROR [main] KeyError: 'u-1'") == ParsedError(
        "message", "KeyError", "'u-1'", ())


def test_a_multi_line_message_without_frames_is_one_message() -> None:
    assert parse_error("build failed\n  step 3 of 7\n") == ParsedError(
        "message", None, "build failed step 3 of 7", ())


def test_paths_keep_their_last_two_parts() -> None:
    assert normalise_path("/home/alice/src/proj/app/models.py") == "app/models.py"
    assert normalise_path("C:\\work\\proj\\app\\models.py") == "app/models.py"
    assert normalise_path("file:///srv/app/index.mjs") == "app/index.mjs"
    assert normalise_path("./main.rs") == "main.rs"
