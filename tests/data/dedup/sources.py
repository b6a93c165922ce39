"""Source texts of the labelled near-duplicate set (see README.md in this folder).

Each group is one finding as several agents would report it. ``text`` is the original; the
hand-written ``paraphrases`` say the same thing in other words; a ``{file}`` placeholder marks a
finding that also appears, word for word, in another file (``files``). Groups sharing a ``family``
are about the same subject but say different things: their pairs must not merge.

Origins: code findings restate public CVE descriptions of the Python standard library and common
bug classes; documentation paragraphs are CPython's language reference (pydoc_data.topics, 3.11);
research statements are public facts about protocols and standards; tests and translations are
written the way agents of those task types answer.
"""

from __future__ import annotations

from typing import Any

GROUPS: list[dict[str, Any]] = [
    # ---------------------------------------------------------------- code analysis
    {
        "id": "code-tarfile",
        "task_type": "code_analysis",
        "family": "path-traversal",
        "category": "security",
        "title": "Path traversal when extracting tar archives",
        "text": (
            "The extract and extractall calls in {file} do not validate member names. "
            "A crafted TAR archive with a .. (dot dot) sequence in a filename can overwrite arbitrary files "
            "outside the destination directory. Pass filter='data' or check each member path before extracting."
        ),
        "files": ["src/backup/restore.py", "src/plugins/installer.py"],
        "paraphrases": [
            (
                "Unsafe tarfile extraction",
                "{file} calls extractall on an archive it does not control without checking member paths. "
                "Because names containing '../' are honoured, a malicious tarball can write files anywhere the "
                "process can write. Use the 'data' extraction filter or reject members that resolve outside "
                "the target folder.",
            ),
        ],
    },
    {
        "id": "code-zipslip",
        "task_type": "code_analysis",
        "family": "path-traversal",
        "category": "security",
        "title": "Zip entries are written without normalising their paths",
        "text": (
            "The archive importer in {file} joins each ZIP entry name to the upload directory and opens the "
            "result for writing. Absolute entry names are kept as they are, so an entry named /etc/cron.d/job "
            "replaces a system file when the service runs as root. Strip leading slashes and drive letters "
            "and compare the resolved path with the upload directory."
        ),
        "files": ["src/importers/zip_import.py"],
        "paraphrases": [
            (
                "Absolute paths in ZIP entries are honoured",
                "When {file} unpacks an uploaded ZIP it trusts the entry names, including absolute ones such as "
                "/etc/cron.d/job, and writes them directly; running as root this overwrites system files. "
                "Entry names should be made relative and checked against the upload folder after resolving.",
            ),
        ],
    },
    {
        "id": "code-sqli-login",
        "task_type": "code_analysis",
        "family": "sql-injection",
        "category": "security",
        "title": "SQL injection in the login query",
        "text": (
            "authenticate() in {file} builds its SELECT statement with an f-string that inserts the submitted "
            "user name. A user name such as admin' -- logs in without a password. Use a parameterised query "
            "with placeholders instead of string formatting."
        ),
        "files": ["app/auth/login.py", "legacy/auth/login.py"],
        "paraphrases": [
            (
                "Login is vulnerable to SQL injection",
                "The username reaches the database unescaped: {file} formats it straight into the SELECT in "
                "authenticate(), so input like admin' -- bypasses the password check. Bind it as a query "
                "parameter rather than interpolating it.",
            ),
        ],
    },
    {
        "id": "code-sqli-order",
        "task_type": "code_analysis",
        "family": "sql-injection",
        "category": "security",
        "title": "SQL injection through the sort column",
        "text": (
            "The report endpoint in {file} appends the sort query parameter to ORDER BY without checking it. "
            "Placeholders cannot bind column names, so the value must be compared against an allow-list of "
            "sortable columns. An attacker can use a CASE expression in the parameter to read other tables."
        ),
        "files": ["app/reports/views.py"],
        "paraphrases": [
            (
                "ORDER BY clause built from user input",
                "In {file} the sort parameter of the report endpoint goes into ORDER BY as it was sent. Since a "
                "column name cannot be a bound parameter, only an allow-list of known columns makes this safe; "
                "as written, a CASE expression in the value lets an attacker read data from other tables.",
            ),
        ],
    },
    {
        "id": "code-crlf",
        "task_type": "code_analysis",
        "family": "injection-http",
        "category": "security",
        "title": "CRLF injection in outgoing request URLs",
        "text": (
            "The webhook client in {file} passes the configured URL to urlopen unchanged. If an attacker "
            "controls the URL, CR and LF characters in the path or query inject extra HTTP headers into the "
            "request. Reject URLs that contain control characters before sending."
        ),
        "files": ["src/notify/webhook.py"],
        "paraphrases": [
            (
                "Header injection via webhook URL",
                "Control characters are not filtered from webhook URLs in {file}: a URL holding \\r\\n sequences "
                "makes urlopen send attacker-chosen headers. Validate the URL and refuse carriage returns and "
                "line feeds.",
            ),
        ],
    },
    {
        "id": "code-parse-qsl",
        "task_type": "code_analysis",
        "family": "injection-http",
        "category": "security",
        "title": "Query strings split on semicolons enable cache poisoning",
        "text": (
            "The proxy layer in {file} parses query strings with a parser that treats both & and ; as "
            "separators, while the cache in front of it only splits on &. A request can carry a parameter that "
            "the cache ignores but the application reads, which poisons cached responses. Configure the parser "
            "to accept & only."
        ),
        "files": ["src/edge/cache_keys.py"],
        "paraphrases": [],
    },
    {
        "id": "code-redos",
        "task_type": "code_analysis",
        "family": "dos",
        "category": "performance",
        "title": "Regular expression with catastrophic backtracking",
        "text": (
            "The authentication header parser in {file} matches the realm with a regular expression that "
            "contains nested quantifiers. A long header made of repeated commas makes the match take "
            "exponential time and blocks the worker. Rewrite the pattern without nested repetition or limit the "
            "header length."
        ),
        "files": ["src/http/auth_header.py", "vendor/httpkit/auth.py"],
        "paraphrases": [
            (
                "ReDoS in realm parsing",
                "A crafted WWW-Authenticate header can hang a worker: the realm regex in {file} nests quantifiers, "
                "so many repeated commas trigger exponential backtracking. Cap the header length or use a "
                "pattern without nested repetition.",
            ),
        ],
    },
    {
        "id": "code-int-str",
        "task_type": "code_analysis",
        "family": "dos",
        "category": "performance",
        "title": "Unbounded integer parsing of request fields",
        "text": (
            "The JSON handler in {file} converts numeric strings from the request body with int() and no length "
            "limit. Converting a string of hundreds of thousands of digits takes quadratic time, so a few "
            "requests can occupy every worker. Limit the number of digits before converting."
        ),
        "files": ["src/api/payload.py"],
        "paraphrases": [
            (
                "Quadratic-time int conversion on user input",
                "Request values in {file} are passed to int() whatever their length. Because decimal-string to "
                "integer conversion is quadratic, a body with a huge digit string ties up a worker for a long "
                "time; cap the digit count first.",
            ),
        ],
    },
    {
        "id": "code-mailcap",
        "task_type": "code_analysis",
        "family": "command-injection",
        "category": "security",
        "title": "Shell command built from a file name",
        "text": (
            "The attachment preview in {file} finds a viewer command through mailcap and substitutes the "
            "attachment's file name into it before running it with a shell. A file name containing shell "
            "metacharacters such as ; or $( ) executes arbitrary commands. Quote the name with shlex.quote or "
            "run the viewer without a shell."
        ),
        "files": ["src/mail/preview.py"],
        "paraphrases": [
            (
                "Command injection in attachment preview",
                "{file} runs the mailcap viewer through the shell with the attachment name pasted in, so a name "
                "like 'x;rm -rf ~' runs the injected command. Escape it with shlex.quote, or better, pass an "
                "argument list without shell=True.",
            ),
        ],
    },
    {
        "id": "code-make-archive",
        "task_type": "code_analysis",
        "family": "command-injection",
        "category": "security",
        "title": "Archive creation passes user input to an external tool",
        "text": (
            "export_project() in {file} creates the download archive by calling the zip program through "
            "os.system with the project title in the output file name. A title that starts with a dash is read "
            "as an option, and quotes in it break out of the argument. Build the archive with the zipfile module "
            "instead."
        ),
        "files": ["src/export/archive.py"],
        "paraphrases": [],
    },
    {
        "id": "code-bare-except",
        "task_type": "code_analysis",
        "family": "error-handling",
        "category": "bug",
        "title": "Bare except hides failures when saving settings",
        "text": (
            "save_settings() in {file} wraps the write in try/except with a bare except clause and returns True "
            "either way. Disk-full and permission errors are silently ignored, and the user is told the "
            "settings were saved. Catch OSError only and report the failure."
        ),
        "files": ["src/ui/settings.py", "src/cli/settings.py"],
        "paraphrases": [
            (
                "Settings save reports success on error",
                "Because {file} catches every exception in save_settings() and still returns True, a failed "
                "write (no space left, no permission) looks like a success to the user. Narrow the handler to "
                "OSError and surface the error.",
            ),
        ],
    },
    {
        "id": "code-retry-swallow",
        "task_type": "code_analysis",
        "family": "error-handling",
        "category": "bug",
        "title": "Retry loop swallows the last error",
        "text": (
            "fetch_with_retry() in {file} retries three times and, when the last attempt fails, returns None "
            "instead of raising. Callers treat None as an empty result, so an outage looks like a day without "
            "data. Re-raise the last exception after the final attempt."
        ),
        "files": ["src/ingest/client.py"],
        "paraphrases": [
            (
                "Failed fetch is reported as empty data",
                "After its third failed attempt, fetch_with_retry() in {file} gives back None rather than an "
                "exception; the callers read that as 'no data', so an outage passes unnoticed. The final error "
                "should propagate.",
            ),
        ],
    },
    {
        "id": "code-mutable-default",
        "task_type": "code_analysis",
        "family": "python-pitfalls",
        "category": "bug",
        "title": "Mutable default argument shared between calls",
        "text": (
            "add_tag(tag, tags=[]) in {file} appends to its default list. The default is created once, when the "
            "function is defined, so tags from earlier calls leak into later ones. Use None as the default and "
            "create a new list inside the function."
        ),
        "files": ["src/models/tags.py", "src/models/labels.py"],
        "paraphrases": [
            (
                "Default list argument accumulates values",
                "The tags=[] default of add_tag() in {file} is evaluated a single time at definition, so every "
                "call that relies on the default mutates the same list and sees tags added by previous calls. "
                "Default to None and build the list in the body.",
            ),
        ],
    },
    {
        "id": "code-late-binding",
        "task_type": "code_analysis",
        "family": "python-pitfalls",
        "category": "bug",
        "title": "Closures in a loop all use the last value",
        "text": (
            "register_handlers() in {file} creates one lambda per event name inside a for loop, and each lambda "
            "refers to the loop variable. Python closures bind variables late, so every handler receives the "
            "last event name. Bind the current value with a default argument or functools.partial."
        ),
        "files": ["src/events/registry.py"],
        "paraphrases": [
            (
                "Late binding in loop-created callbacks",
                "All callbacks built in the loop of register_handlers() ({file}) read the loop variable when "
                "called, not when created, so they all see the final event name. Capture the value per "
                "iteration, for example with functools.partial.",
            ),
        ],
    },
    {
        "id": "code-float-money",
        "task_type": "code_analysis",
        "family": "numeric",
        "category": "bug",
        "title": "Currency amounts computed with floats",
        "text": (
            "The invoice total in {file} sums line amounts as binary floating-point numbers and rounds at the "
            "end. Amounts such as 0.1 have no exact binary representation, so totals are off by a cent on some "
            "invoices. Use decimal.Decimal with an explicit rounding mode for money."
        ),
        "files": ["src/billing/invoice.py", "src/billing/credit_note.py"],
        "paraphrases": [
            (
                "Float rounding errors in invoice totals",
                "{file} adds up invoice lines as floats; because values like 0.1 cannot be stored exactly in "
                "binary, some totals come out one cent wrong. Money should be handled with Decimal and a "
                "defined rounding mode.",
            ),
        ],
    },
    {
        "id": "code-timezone",
        "task_type": "code_analysis",
        "family": "numeric",
        "category": "bug",
        "title": "Naive datetimes compared with aware ones",
        "text": (
            "is_expired() in {file} compares the token's expiry, stored as an aware UTC datetime, with "
            "datetime.now(), which is naive. The comparison raises TypeError at run time, and where the code "
            "strips the timezone first it is off by the server's UTC offset. Use datetime.now(timezone.utc)."
        ),
        "files": ["src/auth/tokens.py"],
        "paraphrases": [],
    },
    {
        "id": "code-md5",
        "task_type": "code_analysis",
        "family": "crypto",
        "category": "security",
        "title": "Passwords hashed with unsalted MD5",
        "text": (
            "create_user() in {file} stores hashlib.md5(password).hexdigest(). MD5 is fast and the hash has no "
            "salt, so leaked hashes can be reversed with precomputed tables in minutes. Use a password hashing "
            "function such as scrypt, bcrypt or argon2 with a per-user salt."
        ),
        "files": ["src/accounts/users.py"],
        "paraphrases": [
            (
                "Weak password storage",
                "User passwords in {file} are saved as plain MD5 digests without salt. A fast, unsalted hash "
                "falls to rainbow tables almost immediately if the database leaks; switch to a slow, salted "
                "password hash like argon2, bcrypt or scrypt.",
            ),
        ],
    },
    {
        "id": "code-random-token",
        "task_type": "code_analysis",
        "family": "crypto",
        "category": "security",
        "title": "Reset tokens generated with the random module",
        "text": (
            "The password reset token in {file} is built from random.choice over letters and digits. The random "
            "module is a Mersenne Twister whose state can be recovered from its outputs, so tokens are "
            "predictable. Generate tokens with secrets.token_urlsafe."
        ),
        "files": ["src/accounts/reset.py"],
        "paraphrases": [
            (
                "Predictable password reset tokens",
                "{file} draws reset tokens from random.choice. That generator is not cryptographically secure: "
                "after observing enough outputs an attacker can predict the next tokens. Use the secrets module "
                "(secrets.token_urlsafe) instead.",
            ),
        ],
    },
    {
        "id": "code-n-plus-one",
        "task_type": "code_analysis",
        "family": "orm",
        "category": "performance",
        "title": "N+1 queries when listing orders",
        "text": (
            "list_orders() in {file} loads the orders with one query and then reads order.customer.name inside "
            "the loop, which issues one more query per order. A page of 500 orders makes 501 queries. Load the "
            "customers in the same query with select_related or a join."
        ),
        "files": ["src/shop/orders.py", "src/admin/orders.py"],
        "paraphrases": [
            (
                "One query per order for customer names",
                "Rendering the order list in {file} triggers a separate customer lookup for every order because "
                "order.customer is accessed lazily in the loop; 500 orders mean 501 round trips. Fetch the "
                "customers up front with select_related.",
            ),
        ],
    },
    {
        "id": "code-missing-index",
        "task_type": "code_analysis",
        "family": "orm",
        "category": "performance",
        "title": "Lookup by email scans the whole users table",
        "text": (
            "find_by_email() in {file} filters users on the email column, which has no index. On the production "
            "table of several million rows each login performs a sequential scan. Add a unique index on "
            "lower(email)."
        ),
        "files": ["src/accounts/queries.py"],
        "paraphrases": [],
    },
    # ---------------------------------------------------------------- documentation (CPython reference)
    {
        "id": "doc-break",
        "task_type": "documentation",
        "family": "loop-control",
        "category": "statements",
        "title": "The break statement",
        "text": (
            "break may only occur syntactically nested in a for or while loop, but not nested in a function or "
            "class definition within that loop. It terminates the nearest enclosing loop, skipping the optional "
            "else clause if the loop has one. If a for loop is terminated by break, the loop control target "
            "keeps its current value. When break passes control out of a try statement with a finally clause, "
            "that finally clause is executed before really leaving the loop."
        ),
        "paraphrases": [],
    },
    {
        "id": "doc-continue",
        "task_type": "documentation",
        "family": "loop-control",
        "category": "statements",
        "title": "The continue statement",
        "text": (
            "continue may only occur syntactically nested in a for or while loop, but not nested in a function "
            "or class definition within that loop. It continues with the next cycle of the nearest enclosing "
            "loop. When continue passes control out of a try statement with a finally clause, that finally "
            "clause is executed before really starting the next loop cycle."
        ),
        "paraphrases": [],
    },
    {
        "id": "doc-return",
        "task_type": "documentation",
        "family": "function-exit",
        "category": "statements",
        "title": "The return statement",
        "text": (
            "return may only occur syntactically nested in a function definition, not within a nested class "
            "definition. If an expression list is present, it is evaluated, else None is substituted. return "
            "leaves the current function call with the expression list (or None) as return value. When return "
            "passes control out of a try statement with a finally clause, that finally clause is executed before "
            "really leaving the function."
        ),
        "paraphrases": [
            (
                "return",
                "A return statement is only allowed inside a function definition (not in a class nested in it). "
                "It ends the current function call and hands back the value of its expression list, or None "
                "when there is none. If it leaves a try block that has a finally clause, the finally clause "
                "runs before the function is actually left.",
            ),
        ],
    },
    {
        "id": "doc-yield",
        "task_type": "documentation",
        "family": "function-exit",
        "category": "statements",
        "title": "The yield statement",
        "text": (
            "A yield statement is semantically equivalent to a yield expression. The yield statement can be used "
            "to omit the parentheses that would otherwise be required in the equivalent yield expression "
            "statement. Yield expressions and statements are only used when defining a generator function, and "
            "are only used in the body of the generator function. Using yield in a function definition is "
            "sufficient to cause that definition to create a generator function instead of a normal function."
        ),
        "paraphrases": [],
    },
    {
        "id": "doc-global",
        "task_type": "documentation",
        "family": "scopes",
        "category": "statements",
        "title": "The global statement",
        "text": (
            "The global statement is a declaration which holds for the entire current code block. It means that "
            "the listed identifiers are to be interpreted as globals. It would be impossible to assign to a "
            "global variable without global, although free variables may refer to globals without being "
            "declared global. Names listed in a global statement must not be used in the same code block "
            "textually preceding that global statement."
        ),
        "paraphrases": [
            (
                "global declarations",
                "Declaring a name with global applies to the whole current code block and makes the name refer "
                "to the module-level variable. Without the declaration you cannot assign to a global, although "
                "you can still read one as a free variable. A name must not appear in the block before its "
                "global declaration.",
            ),
        ],
    },
    {
        "id": "doc-nonlocal",
        "task_type": "documentation",
        "family": "scopes",
        "category": "statements",
        "title": "The nonlocal statement",
        "text": (
            "The nonlocal statement causes the listed identifiers to refer to previously bound variables in the "
            "nearest enclosing scope excluding globals. This is important because the default behavior for "
            "binding is to search the local namespace first. Names listed in a nonlocal statement, unlike those "
            "listed in a global statement, must refer to pre-existing bindings in an enclosing scope. Names "
            "listed in a nonlocal statement must not collide with pre-existing bindings in the local scope."
        ),
        "paraphrases": [],
    },
    {
        "id": "doc-while",
        "task_type": "documentation",
        "family": "loops",
        "category": "statements",
        "title": "The while statement",
        "text": (
            "The while statement is used for repeated execution as long as an expression is true. This "
            "repeatedly tests the expression and, if it is true, executes the first suite; if the expression is "
            "false (which may be the first time it is tested) the suite of the else clause, if present, is "
            "executed and the loop terminates. A break statement executed in the first suite terminates the "
            "loop without executing the else clause's suite."
        ),
        "paraphrases": [],
    },
    {
        "id": "doc-for",
        "task_type": "documentation",
        "family": "loops",
        "category": "statements",
        "title": "The for statement",
        "text": (
            "The for statement is used to iterate over the elements of a sequence (such as a string, tuple or "
            "list) or other iterable object. The starred_list expression is evaluated once; it should yield an "
            "iterable object. An iterator is created for that iterable. When the iterator is exhausted, the "
            "suite in the else clause, if present, is executed, and the loop terminates. A break statement "
            "executed in the first suite terminates the loop without executing the else clause's suite."
        ),
        "paraphrases": [
            (
                "for loops",
                "A for loop walks over the items of a sequence such as a string, tuple or list, or of any other "
                "iterable. Its iterable expression is evaluated a single time and an iterator is made from it. "
                "Once the iterator runs out, the optional else suite runs and the loop ends; leaving the loop "
                "with break skips the else suite.",
            ),
        ],
    },
    {
        "id": "doc-assert",
        "task_type": "documentation",
        "family": "debugging",
        "category": "statements",
        "title": "The assert statement",
        "text": (
            "Assert statements are a convenient way to insert debugging assertions into a program. In the "
            "current implementation, the built-in variable __debug__ is True under normal circumstances, False "
            "when optimization is requested (command line option -O). The current code generator emits no code "
            "for an assert statement when optimization is requested at compile time. Assignments to __debug__ "
            "are illegal."
        ),
        "paraphrases": [],
    },
    {
        "id": "doc-pass",
        "task_type": "documentation",
        "family": "debugging",
        "category": "statements",
        "title": "The pass statement",
        "text": (
            "pass is a null operation: when it is executed, nothing happens. It is useful as a placeholder when "
            "a statement is required syntactically, but no code needs to be executed, for example a function "
            "that does nothing yet or a class with no methods yet."
        ),
        "paraphrases": [],
    },
    {
        "id": "doc-del",
        "task_type": "documentation",
        "family": "bindings",
        "category": "statements",
        "title": "The del statement",
        "text": (
            "Deletion is recursively defined very similar to the way assignment is defined. Deletion of a target "
            "list recursively deletes each target, from left to right. Deletion of a name removes the binding of "
            "that name from the local or global namespace, depending on whether the name occurs in a global "
            "statement in the same code block. If the name is unbound, a NameError exception will be raised."
        ),
        "paraphrases": [],
    },
    {
        "id": "doc-raise",
        "task_type": "documentation",
        "family": "bindings",
        "category": "statements",
        "title": "The raise statement",
        "text": (
            "If no expressions are present, raise re-raises the exception that is currently being handled, which "
            "is also known as the active exception. If there isn't currently an active exception, a "
            "RuntimeError exception is raised indicating that this is an error. Otherwise, raise evaluates the "
            "first expression as the exception object. It must be either a subclass or an instance of "
            "BaseException."
        ),
        "paraphrases": [],
    },
    # ---------------------------------------------------------------- web research
    {
        "id": "web-http2-hpack",
        "task_type": "web_research",
        "family": "http-versions",
        "category": "protocols",
        "title": "HTTP/2 compresses headers with HPACK",
        "text": (
            "HTTP/2, published as RFC 7540 in 2015, multiplexes many requests over one TCP connection as "
            "independent streams. Header fields are compressed with HPACK, which uses a static table, a dynamic "
            "table and Huffman coding. Because all streams share one TCP connection, a lost packet still stalls "
            "every stream."
        ),
        "paraphrases": [
            (
                "HTTP/2: multiplexing and HPACK",
                "RFC 7540 (2015) defines HTTP/2, which carries many concurrent request streams over a single TCP "
                "connection and shrinks headers with HPACK (static and dynamic tables plus Huffman codes). Head-"
                "of-line blocking remains at the TCP layer: one lost packet holds up all streams.",
            ),
        ],
    },
    {
        "id": "web-http3-qpack",
        "task_type": "web_research",
        "family": "http-versions",
        "category": "protocols",
        "title": "HTTP/3 runs over QUIC and uses QPACK",
        "text": (
            "HTTP/3, published as RFC 9114 in 2022, maps HTTP semantics onto QUIC, which runs over UDP. Header "
            "fields are compressed with QPACK, a variant of HPACK that tolerates out-of-order delivery. Because "
            "QUIC streams are independent, a lost packet only stalls the stream it belongs to."
        ),
        "paraphrases": [
            (
                "HTTP/3 over QUIC",
                "Standardised in 2022 as RFC 9114, HTTP/3 carries HTTP over QUIC on top of UDP and replaces HPACK "
                "with QPACK so that header compression survives packets arriving out of order. Loss on one QUIC "
                "stream does not block the others.",
            ),
        ],
    },
    {
        "id": "web-tls13",
        "task_type": "web_research",
        "family": "tls",
        "category": "security",
        "title": "TLS 1.3 shortens the handshake to one round trip",
        "text": (
            "TLS 1.3 (RFC 8446, 2018) completes a full handshake in one round trip instead of two and supports "
            "zero round trip resumption. It removed static RSA key exchange, so every connection has forward "
            "secrecy, and it dropped legacy ciphers such as RC4 and CBC-mode suites."
        ),
        "paraphrases": [
            (
                "TLS 1.3 handshake and ciphers",
                "Published in 2018 as RFC 8446, TLS 1.3 needs a single round trip for a full handshake (0-RTT "
                "for resumed sessions). Static RSA key exchange is gone, making forward secrecy mandatory, and "
                "old ciphers like RC4 and the CBC suites were removed.",
            ),
        ],
    },
    {
        "id": "web-tls12",
        "task_type": "web_research",
        "family": "tls",
        "category": "security",
        "title": "TLS 1.2 added authenticated encryption",
        "text": (
            "TLS 1.2 (RFC 5246, 2008) introduced authenticated encryption modes such as AES-GCM and let the "
            "peers negotiate the hash function used in the handshake, replacing the fixed MD5 and SHA-1 "
            "combination of earlier versions. A full handshake still takes two round trips."
        ),
        "paraphrases": [],
    },
    {
        "id": "web-python-gil",
        "task_type": "web_research",
        "family": "python-releases",
        "category": "languages",
        "title": "Python 3.13 offers an experimental build without the GIL",
        "text": (
            "Python 3.13, released in October 2024, ships an experimental free-threaded build in which the "
            "global interpreter lock is disabled, as proposed in PEP 703. Threads can then run Python code on "
            "several cores at once, but single-threaded code is slower and many C extensions must be rebuilt."
        ),
        "paraphrases": [
            (
                "Free-threaded CPython 3.13",
                "With PEP 703, CPython 3.13 (October 2024) added an optional, experimental build that runs without "
                "the GIL, so Python threads can execute in parallel on multiple cores. The cost is slower "
                "single-threaded performance and C extensions that need to be recompiled for it.",
            ),
        ],
    },
    {
        "id": "web-python-jit",
        "task_type": "web_research",
        "family": "python-releases",
        "category": "languages",
        "title": "Python 3.13 adds an experimental JIT compiler",
        "text": (
            "Python 3.13 also includes an experimental just-in-time compiler based on the copy-and-patch "
            "technique, described in PEP 744. It is disabled by default and must be enabled when CPython is "
            "built; early measurements show only small speedups."
        ),
        "paraphrases": [],
    },
    {
        "id": "web-postgres-mvcc",
        "task_type": "web_research",
        "family": "databases",
        "category": "databases",
        "title": "PostgreSQL uses MVCC and needs VACUUM",
        "text": (
            "PostgreSQL implements multiversion concurrency control by writing a new row version on every "
            "update and leaving the old one in place. Readers never block writers, but dead row versions "
            "accumulate until VACUUM reclaims them, and autovacuum runs this in the background."
        ),
        "paraphrases": [
            (
                "MVCC in PostgreSQL",
                "Updates in PostgreSQL create a new version of the row while the previous version stays in the "
                "table, which is how its multiversion concurrency control lets reads and writes proceed without "
                "blocking each other. The obsolete versions pile up until VACUUM (usually autovacuum) cleans "
                "them out.",
            ),
        ],
    },
    {
        "id": "web-sqlite-wal",
        "task_type": "web_research",
        "family": "databases",
        "category": "databases",
        "title": "SQLite WAL mode allows concurrent readers",
        "text": (
            "In write-ahead log mode SQLite appends changes to a separate WAL file instead of rewriting the "
            "database, so readers continue to see a consistent snapshot while one writer commits. There is "
            "still only one writer at a time, and checkpoints copy the WAL back into the database file."
        ),
        "paraphrases": [
            (
                "SQLite write-ahead logging",
                "SQLite's WAL journal mode writes changes to a side file rather than the main database, letting "
                "readers keep a stable snapshot during a commit. Writers are still serialised, one at a time, "
                "and a checkpoint later moves the logged pages into the database.",
            ),
        ],
    },
    {
        "id": "web-kueue",
        "task_type": "web_research",
        "family": "schedulers",
        "category": "infrastructure",
        "title": "Kueue admits jobs against quotas",
        "text": (
            "Kueue is a Kubernetes job queueing system that decides when a job may start by checking its "
            "resource requests against the quota of a ClusterQueue. Queues can lend unused quota to each other "
            "within a cohort, and higher-priority workloads can preempt lower-priority ones."
        ),
        "paraphrases": [
            (
                "Kueue quota-based admission",
                "On Kubernetes, Kueue holds jobs in queues and only admits one when its resource requests fit in "
                "its ClusterQueue's quota. ClusterQueues in the same cohort can borrow each other's idle quota, "
                "and workloads with a higher priority may preempt those with a lower one.",
            ),
        ],
    },
    {
        "id": "web-ray",
        "task_type": "web_research",
        "family": "schedulers",
        "category": "infrastructure",
        "title": "Ray schedules tasks and actors across a cluster",
        "text": (
            "Ray runs Python functions as remote tasks and Python classes as stateful actors on a cluster. A "
            "distributed object store holds task results so that other tasks can read them without copying "
            "through the driver, and the scheduler places work according to declared CPU, GPU and memory needs."
        ),
        "paraphrases": [],
    },
    # ---------------------------------------------------------------- test generation
    {
        "id": "test-parse-empty",
        "task_type": "test_generation",
        "family": "parse-date",
        "category": "tests",
        "title": "parse_date rejects an empty string",
        "text": (
            "def test_parse_date_rejects_empty_string():\n    with pytest.raises(ValueError):\n        parse_date('')"
        ),
        "paraphrases": [
            (
                "Empty input raises ValueError in parse_date",
                'def test_empty_input_raises():\n    with pytest.raises(ValueError):\n        parse_date("")',
            ),
        ],
    },
    {
        "id": "test-parse-iso",
        "task_type": "test_generation",
        "family": "parse-date",
        "category": "tests",
        "title": "parse_date reads an ISO 8601 date",
        "text": ("def test_parse_date_reads_iso_format():\n    assert parse_date('2024-02-29') == date(2024, 2, 29)"),
        "paraphrases": [
            (
                "ISO dates are parsed by parse_date",
                'def test_iso_date_is_parsed():\n    assert parse_date("2024-02-29") == date(2024, 2, 29)',
            ),
        ],
    },
    {
        "id": "test-parse-invalid-day",
        "task_type": "test_generation",
        "family": "parse-date",
        "category": "tests",
        "title": "parse_date rejects February 30",
        "text": (
            "def test_parse_date_rejects_impossible_day():\n"
            "    with pytest.raises(ValueError):\n"
            "        parse_date('2023-02-30')"
        ),
        "paraphrases": [],
    },
    {
        "id": "test-slugify-spaces",
        "task_type": "test_generation",
        "family": "slugify",
        "category": "tests",
        "title": "slugify joins words with hyphens",
        "text": "def test_slugify_replaces_spaces_with_hyphens():\n    assert slugify('Hello World') == 'hello-world'",
        "paraphrases": [
            (
                "slugify turns spaces into dashes",
                'def test_spaces_become_hyphens():\n    assert slugify("Hello World") == "hello-world"',
            ),
        ],
    },
    {
        "id": "test-slugify-unicode",
        "task_type": "test_generation",
        "family": "slugify",
        "category": "tests",
        "title": "slugify strips accents",
        "text": "def test_slugify_strips_accents():\n    assert slugify('Crème Brûlée') == 'creme-brulee'",
        "paraphrases": [],
    },
    # ---------------------------------------------------------------- translation
    {
        "id": "tr-de-1",
        "task_type": "translation",
        "family": "tr-manual",
        "category": "translation",
        "title": "Sentence 12 (de)",
        "text": "Schalten Sie das Gerät aus, bevor Sie die Abdeckung entfernen.",
        "paraphrases": [
            ("Sentence 12 (de)", "Schalten Sie das Gerät aus, bevor Sie den Deckel abnehmen."),
        ],
    },
    {
        "id": "tr-de-2",
        "task_type": "translation",
        "family": "tr-manual",
        "category": "translation",
        "title": "Sentence 13 (de)",
        "text": "Ziehen Sie den Netzstecker, bevor Sie das Gerät reinigen.",
        "paraphrases": [],
    },
    {
        "id": "tr-fr-1",
        "task_type": "translation",
        "family": "tr-manual-fr",
        "category": "translation",
        "title": "Sentence 12 (fr)",
        "text": "Éteignez l'appareil avant de retirer le couvercle.",
        "paraphrases": [("Sentence 12 (fr)", "Éteignez l'appareil avant d'enlever le couvercle.")],
    },
    {
        "id": "tr-fr-2",
        "task_type": "translation",
        "family": "tr-manual-fr",
        "category": "translation",
        "title": "Sentence 13 (fr)",
        "text": "Débranchez l'appareil avant de le nettoyer.",
        "paraphrases": [],
    },
    {
        "id": "tr-es-1",
        "task_type": "translation",
        "family": "tr-manual-es",
        "category": "translation",
        "title": "Sentence 12 (es)",
        "text": "Apague el aparato antes de quitar la tapa.",
        "paraphrases": [("Sentence 12 (es)", "Apague el dispositivo antes de retirar la tapa.")],
    },
    {
        "id": "tr-es-2",
        "task_type": "translation",
        "family": "tr-manual-es",
        "category": "translation",
        "title": "Sentence 14 (es)",
        "text": "Apague el aparato antes de cambiar el filtro.",
        "paraphrases": [],
    },
]
