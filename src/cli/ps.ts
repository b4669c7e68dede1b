// `profcpu ps`: not written yet.
import type { CommandModule } from 'yargs';
import { ProfcpuError } from '../error.js';

const command: CommandModule = {
  command: 'ps',
  describe: '(not implemented yet)',
  handler: () => {
    throw new ProfcpuError('USAGE', '`profcpu ps` is not implemented yet');
  },
};

export default command;
