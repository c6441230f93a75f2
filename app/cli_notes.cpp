// lathe-cli tag / note (see cli_notes.h): through Store's notes-and-tags API, as the GUI does.
#include "app/cli_notes.h"

#include <iostream>
#include <memory>
#include <vector>

#include "engine/store/store.h"

namespace lathe::cli {

void add_note_commands(CLI::App& app, const std::string& db_path, int& exit_code) {
  struct TagArgs {
    std::string run;
    std::vector<std::string> tags;
    bool remove = false;
  };
  auto tag_args = std::make_shared<TagArgs>();
  CLI::App* tag = app.add_subcommand("tag", "Add tags to a run (or take them off with --remove)");
  tag->add_option("run", tag_args->run, "Run id, unique id prefix or name")->required();
  tag->add_option("tags", tag_args->tags, "Tags (no whitespace or commas, at most 64 characters)")->required();
  tag->add_flag("--remove", tag_args->remove, "Remove these tags instead");
  tag->callback([&, tag_args] {
    Store store = Store::open(db_path);
    const std::string id = store.resolve_run(tag_args->run);
    if (tag_args->remove)
      store.remove_tags(id, tag_args->tags);
    else
      store.add_tags(id, tag_args->tags);
    std::string now;
    for (const std::string& t : store.run(id).tags)
      now += (now.empty() ? "" : ",") + t;
    std::cout << id << " tags: " << (now.empty() ? "(none)" : now) << "\n";
    exit_code = 0;
  });

  auto note_run = std::make_shared<std::string>();
  auto note_text = std::make_shared<std::string>();
  CLI::App* note = app.add_subcommand("note", "Set a run's note (\"\" clears it)");
  note->add_option("run", *note_run, "Run id, unique id prefix or name")->required();
  note->add_option("text", *note_text, "The note (one argument: quote it)")->required();
  note->callback([&, note_run, note_text] {
    Store store = Store::open(db_path);
    const std::string id = store.resolve_run(*note_run);
    store.set_note(id, *note_text);
    std::cout << id << (note_text->empty() ? " note cleared" : " note set") << "\n";
    exit_code = 0;
  });
}

}  // namespace lathe::cli
