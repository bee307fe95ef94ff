"""Hand-written English test sentences for parity checks, tests and the benchmark.

Varied on purpose: everyday prose, questions, commands, numbers, technical notes, error text,
agent memories, run digests, code fragments, very short and long texts. Written for this project
(no downloaded data set).
"""

from __future__ import annotations

SENTENCES: tuple[str, ...] = (
    # everyday
    "The cat slept on the warm windowsill all afternoon.",
    "I forgot my umbrella and got soaked on the way to work.",
    "She bakes bread every Sunday morning before anyone else wakes up.",
    "The train to Edinburgh was delayed by forty minutes because of a signal failure.",
    "Could you pass me the salt, please?",
    "We are planning a trip to the mountains next summer.",
    "My grandmother still writes letters by hand and posts them every week.",
    "The restaurant on the corner closed after twenty years in business.",
    "He ran the marathon in just under four hours.",
    "The children built a sandcastle that the tide washed away within minutes.",
    "It rained so hard last night that the river burst its banks.",
    "The museum is free on the first Sunday of every month.",
    "They adopted a rescue dog named Biscuit from the local shelter.",
    "The coffee here is strong enough to wake the dead.",
    "Our neighbours are renovating their kitchen and the drilling starts at seven.",
    "I have never seen so many stars as on that night in the desert.",
    "The library extended its opening hours during the exam period.",
    "Please remember to water the tomatoes while I am away.",
    "The concert was cancelled at the last minute due to illness.",
    "A flock of geese flew low over the frozen lake.",
    # questions
    "What time does the pharmacy open on Saturdays?",
    "How do I reset my password if I no longer have access to my email?",
    "Why is the sky blue during the day and red at sunset?",
    "Where did you put the spare keys to the garage?",
    "Is it safe to eat mushrooms that you find in the forest?",
    "Which programming language should a beginner learn first?",
    "Who won the football match last night?",
    "How long does it take to boil an egg so that the yolk stays soft?",
    "Can you recommend a good book about the history of mathematics?",
    "When is the deadline for submitting the quarterly tax return?",
    # commands and instructions
    "Preheat the oven to 200 degrees and grease a large baking tray.",
    "Turn left at the second traffic light and continue for about a mile.",
    "Send the signed contract back to the legal team by Friday.",
    "Unplug the router, wait thirty seconds and plug it back in.",
    "Close all the windows before you leave the house.",
    "Write your name at the top of every page of the exam.",
    "Store the vaccine between two and eight degrees Celsius.",
    "Tighten the bolts in a star pattern to avoid warping the wheel.",
    # numbers, dates, units
    "The invoice total came to 1,284.50 euros including VAT.",
    "Revenue grew by 17 percent year over year to 4.2 billion dollars.",
    "The meeting has been moved from 3 pm to 4:30 pm on Thursday, March 12.",
    "Mount Everest is 8,849 metres high.",
    "The package weighs 2.3 kg and measures 40 by 30 by 15 centimetres.",
    "Interest rates were raised by a quarter of a percentage point.",
    "The flight from Tokyo to San Francisco takes about nine hours.",
    "Only 3 of the 120 participants reported any side effects.",
    # science and nature
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Black holes form when massive stars collapse under their own gravity.",
    "The human heart beats roughly one hundred thousand times a day.",
    "Honeybees communicate the location of flowers with a waggle dance.",
    "Water expands when it freezes, which is why pipes burst in winter.",
    "Antibiotics are ineffective against viral infections such as the common cold.",
    "The Amazon rainforest produces a significant share of the world's oxygen.",
    "Earthquakes are caused by the sudden release of energy along fault lines.",
    "Octopuses have three hearts and blue blood.",
    "Sound travels faster through water than through air.",
    # history, culture
    "The Roman Empire split into eastern and western halves in the fourth century.",
    "Shakespeare wrote Hamlet around the year 1600.",
    "The printing press made books far cheaper and spread literacy across Europe.",
    "Jazz originated in the African American communities of New Orleans.",
    "The Great Wall of China was built over many centuries by several dynasties.",
    "The first moon landing took place in July 1969.",
    "Impressionist painters tried to capture the changing effects of light.",
    "The Olympic Games were revived in Athens in 1896.",
    # business, work
    "The board approved the merger after months of negotiation.",
    "Our customer churn dropped after we introduced annual billing.",
    "The new hire will shadow a senior engineer for her first two weeks.",
    "Quarterly planning starts next Monday; bring your team's priorities.",
    "The supplier raised prices, so we are looking for alternatives.",
    "Please keep the status report short and focus on the blockers.",
    "Sales in the northern region exceeded targets for the third month running.",
    "The startup raised a seed round to build tools for small farmers.",
    # software engineering, general
    "The deployment failed because the database migration timed out.",
    "We rolled back the release after error rates spiked in production.",
    "Add an index on the user_id column to speed up the dashboard query.",
    "The unit tests pass locally but fail on the continuous integration server.",
    "Refactor the payment module so that it no longer depends on global state.",
    "The API returns a 429 status code when the client exceeds its rate limit.",
    "Memory usage grows steadily until the container is killed by the OOM killer.",
    "The cache is invalidated whenever a record in the orders table changes.",
    "Use exponential backoff with jitter when retrying failed network requests.",
    "The service reads its configuration from environment variables at startup.",
    "Kafka consumers in the same group share the partitions of a topic.",
    "Postgres is the source of truth; the vector index can be rebuilt from it.",
    "The flaky test depends on the order in which the hash map is iterated.",
    "Pin the dependency versions so that builds are reproducible.",
    "The worker commits offsets only after the record is stored durably.",
    "Long-running transactions block vacuum and cause table bloat.",
    "The TLS certificate expired at midnight and clients started rejecting connections.",
    "A race condition let two workers process the same job twice.",
    "The frontend bundle grew to four megabytes after the charting library was added.",
    "Enable structured logging so that errors can be searched by request id.",
    # error text and tracebacks
    "KeyError: 'user_id' raised in handlers/orders.py line 88 in process_order",
    "TypeError: unsupported operand type(s) for +: 'int' and 'NoneType'",
    "ConnectionRefusedError: [Errno 111] Connection refused while connecting to 127.0.0.1:5432",
    "psycopg2.errors.UniqueViolation: duplicate key value violates unique constraint",
    "java.lang.NullPointerException at com.example.billing.InvoiceService.total",
    "panic: runtime error: index out of range [3] with length 3",
    "error[E0502]: cannot borrow `v` as mutable because it is also borrowed as immutable",
    "ModuleNotFoundError: No module named 'requests'",
    "TimeoutError: the operation did not complete within 30 seconds",
    "npm ERR! code ERESOLVE unable to resolve dependency tree",
    "Segmentation fault (core dumped) after calling the native extension",
    "AssertionError: expected 200 but the response status was 500",
    # agent memories and run digests
    "Lesson: always run the migrations before starting the API server in tests.",
    "Decision: we store embeddings in Qdrant but keep Postgres as the source of truth.",
    "Preference: the user wants short answers with code examples, not long essays.",
    "The agent fixed the failing build by pinning numpy below version two.",
    "Handoff: the refactor of the billing module is half done; tests in billing/ still fail.",
    "Fact: the staging cluster runs three Kafka brokers with replication factor two.",
    "Pattern: when the import fails, check that the virtual environment is activated.",
    "The run finished successfully after the flaky network test was retried.",
    "Commitment: send the weekly summary to the team every Friday afternoon.",
    "The previous run timed out while downloading a large dataset from the mirror.",
    "The user corrected the agent: dates must be formatted as YYYY-MM-DD.",
    "After the patch, the parser handles empty input without raising an exception.",
    "Gotcha: the test database is shared, so tests must clean up their own rows.",
    "Next step: add a retry around the upload and measure how often it is needed.",
    # short fragments
    "Thanks!",
    "Good morning.",
    "Not today.",
    "Yes, exactly.",
    "Done.",
    "See you tomorrow.",
    "Happy birthday!",
    "Out of office.",
    "Build passed.",
    "hello world",
    # opinions and feelings
    "Honestly, I think the sequel was better than the original film.",
    "I am worried that we are taking on too much work this quarter.",
    "The view from the top made the exhausting climb completely worth it.",
    "She was thrilled to finally receive the acceptance letter.",
    "He felt embarrassed after calling his teacher 'mum' in front of the class.",
    "I love the smell of freshly cut grass in spring.",
    "The service was slow and the food arrived cold.",
    "This is the most comfortable pair of shoes I have ever owned.",
    # health and food
    "Drinking enough water helps prevent headaches and fatigue.",
    "The doctor recommended thirty minutes of walking every day.",
    "Add a pinch of salt to the pasta water before it boils.",
    "Dark chocolate contains antioxidants but also a lot of sugar.",
    "The clinic offers flu shots without an appointment on weekdays.",
    "A balanced breakfast keeps you full until lunchtime.",
    "Slice the onions thinly and fry them until golden brown.",
    "Regular sleep is as important for health as diet and exercise.",
    # sports and travel
    "The goalkeeper saved a penalty in the final minute of the match.",
    "Cycling along the coast road is the best way to see the villages.",
    "Our hotel room overlooked the harbour and the old lighthouse.",
    "The tennis final went to five sets and lasted almost five hours.",
    "Pack light: the airline only allows one small bag in the cabin.",
    "The ski resort opened early this year thanks to heavy snowfall.",
    "We missed the last ferry and had to spend the night on the island.",
    "The team trained twice a day in the weeks before the tournament.",
    # law, politics, economy
    "The court ruled that the contract was void because it was signed under duress.",
    "Parliament will vote on the new climate bill next week.",
    "Inflation eased slightly as energy prices fell.",
    "The city council approved funding for three new bike lanes.",
    "Tenants must give two months' notice before moving out.",
    "The central bank kept interest rates unchanged for the sixth time.",
    # longer, medium texts
    "The hiking trail follows the river through a narrow valley, climbs steeply past an old "
    "mill and ends at a lake where, on clear days, you can see the glacier reflected in the "
    "still water.",
    "When the team moved from nightly batch jobs to a streaming pipeline, reports that used "
    "to arrive the next morning became available within seconds, but they also had to learn "
    "how to handle late and duplicated events.",
    "The recipe calls for two cups of flour, one cup of sugar, three eggs and a teaspoon of "
    "vanilla; mix the dry ingredients first, then fold in the eggs gently so the batter stays "
    "light.",
    "In the final chapter the detective gathers everyone in the library and explains, step by "
    "step, how the missing letter proves that the gardener could not have been in the house "
    "that night.",
    "Our on-call engineer was paged at three in the morning because disk usage on the primary "
    "database crossed ninety percent; old WAL files had not been archived since the backup "
    "job started failing silently.",
    "The agent first tried upgrading the library, which broke two other packages, then "
    "reverted, pinned the previous version and added a regression test that reproduces the "
    "original crash.",
    "Solar panels on the school roof now provide about a third of its electricity, and the "
    "students track the daily output as part of their science lessons.",
    "The museum's new wing displays tools, pottery and jewellery found at a Bronze Age "
    "settlement discovered during the construction of the motorway.",
    "If the consumer crashes after writing to the database but before committing its offset, "
    "the message is delivered again, so every write must be idempotent and keyed by the event "
    "id.",
    "She spent the summer volunteering at a wildlife rescue centre, feeding orphaned hedgehogs "
    "every two hours and learning how to treat injured birds.",
    # code fragments and identifiers
    "def add(a, b): return a + b",
    "SELECT id, name FROM users WHERE created_at > now() - interval '7 days';",
    "git rebase -i HEAD~3 and squash the fixup commits",
    "docker compose up -d postgres kafka",
    "for i in range(10): print(i)",
    "export PYTHONPATH=src and rerun pytest -x",
    "curl -X POST localhost:8080/v1/memories -d @memory.json",
    "kubectl rollout restart deployment/api -n production",
    # mixed case, punctuation, odd spacing
    "URGENT!!! The server is DOWN and customers cannot log in!!!",
    "well... i guess we could try again tomorrow?",
    "Q3 OKRs: reduce p99 latency < 200ms; ship v2.1; hire 2 SREs.",
    "  lots   of   spaces   in   this   line  ",
    "e-mail, e.g., i.e., etc. are common abbreviations",
    "The word 'naïve' and the café's crème brûlée both use accents.",
    "Re: Re: Fwd: meeting notes (final) (v3)",
    "TODO: remove this hack once the upstream bug is fixed",
    # paraphrase-ish and contrastive pairs mixed in the set
    "The quick brown fox jumps over the lazy dog.",
    "A fast, brown fox leaps over a sleepy dog.",
    "The weather forecast predicts heavy snow tomorrow.",
    "Tomorrow we expect a lot of snow, according to the forecast.",
    "He bought a new laptop for his programming work.",
    "The bank approved the mortgage application on Tuesday.",
    "The river bank was covered in wild flowers.",
    "Please restart the server after installing the update.",
    "After the update is installed, reboot the machine.",
    "I can't find my phone anywhere.",
    # a few more of everything
    "The volcano erupted again, covering nearby villages in a thin layer of ash.",
    "Remember to rotate the API keys before the audit next month.",
    "Our daughter learned to ride a bike without training wheels this weekend.",
    "The orchestra rehearsed the symphony for weeks before the premiere.",
    "Disk space on the build agents runs out because old Docker images are never pruned.",
    "Would you rather live by the sea or in the mountains?",
    "The translation lost the humour of the original novel.",
    "Farmers are harvesting the wheat early because of the drought.",
    "OSError: [Errno 28] No space left on device",
    "The agent should ask before deleting files outside the project folder.",
)

# (a, b) that mean the same thing; the model must score them above UNRELATED pairs.
PARAPHRASES: tuple[tuple[str, str], ...] = (
    ("A man is playing a guitar.", "Someone is strumming a guitar."),
    ("The weather forecast predicts heavy snow tomorrow.",
     "Tomorrow we expect a lot of snow, according to the forecast."),
    ("Please restart the server after installing the update.",
     "After the update is installed, reboot the machine."),
    ("The deployment failed because the database migration timed out.",
     "A timeout in the DB migration broke the deploy."),
    ("How do I reset my password?", "I forgot my password, how can I change it?"),
    ("The cat slept on the warm windowsill all afternoon.",
     "All afternoon the cat napped on the sunny window ledge."),
    ("Inflation eased slightly as energy prices fell.",
     "Falling energy costs brought inflation down a little."),
    ("The tests pass locally but fail in CI.",
     "On the CI server the tests fail, although they pass on my machine."),
)

UNRELATED: tuple[tuple[str, str], ...] = (
    ("A man is playing a guitar.", "The central bank kept interest rates unchanged."),
    ("The weather forecast predicts heavy snow tomorrow.",
     "Refactor the payment module to remove global state."),
    ("Please restart the server after installing the update.",
     "Honeybees communicate with a waggle dance."),
    ("The deployment failed because the database migration timed out.",
     "She bakes bread every Sunday morning."),
    ("How do I reset my password?", "The Roman Empire split in the fourth century."),
    ("The cat slept on the warm windowsill all afternoon.",
     "Tenants must give two months' notice before moving out."),
    ("Inflation eased slightly as energy prices fell.",
     "Octopuses have three hearts and blue blood."),
    ("The tests pass locally but fail in CI.", "We missed the last ferry to the island."),
)


# The longer prose sentences joined: ~360 words, well over the model's 256 tokens.
LONG_TEXT = " ".join(s for s in SENTENCES if len(s.split()) >= 25)


def short_texts(n: int) -> list[str]:
    """~12-word sentences (the prose ones of SENTENCES, cycled)."""
    pool = [s for s in SENTENCES if 8 <= len(s.split()) <= 16]
    return [pool[i % len(pool)] for i in range(n)]


def medium_texts(n: int) -> list[str]:
    """~60-word texts: consecutive sentences of SENTENCES joined until ~60 words."""
    out: list[str] = []
    i = 0
    while len(out) < n:
        words: list[str] = []
        while len(words) < 60:
            words.extend(SENTENCES[i % len(SENTENCES)].split())
            i += 1
        out.append(" ".join(words[:60]))
    return out
